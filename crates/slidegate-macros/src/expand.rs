//! What `#[rate_limit]` turns a function into: the same function, with a
//! block in front of its body that checks the limiter and returns early.
//!
//! ```text
//! async fn f(..) -> Result<T, E> {
//!     {
//!         static __SLIDEGATE_RULE: RuleCell = RuleCell::new(..);   // inline rules only
//!         let __slidegate_limiter: &Limiter<_> = &(<limiter>);
//!         let __slidegate_rule = __SLIDEGATE_RULE.get();           // or Ok(&(<rule>))
//!         let __slidegate_key_value = &(<key>);
//!         let __slidegate_key = RateLimitKey::rate_limit_key(__slidegate_key_value);
//!         let __slidegate_cost: u32 = <cost>;
//!         check(__slidegate_limiter, __slidegate_rule, &__slidegate_key, __slidegate_cost, <message>).await?;
//!     }
//!     <body>
//! }
//! ```
//!
//! The arguments are only borrowed, inside a block of their own, so the body
//! can still move them. Each `let` carries the span of the expression it
//! binds (with the macro's hygiene, so lints treat it as generated), so that
//! a type error points at the argument that causes it; the `?` carries the
//! attribute's span, so "`?` couldn't convert the error" points at it.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Expr, ItemFn, ReturnType, Stmt, Type};

use crate::args::{Args, RuleArg};
use crate::inline_rule::{Algorithm, InlineRule};

/// Expands `#[rate_limit(<attr>)] <item>`.
pub(crate) fn rate_limit(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let args = syn::parse2::<Args>(attr);
    let mut function = syn::parse2::<ItemFn>(item)?;
    let args = match (args, check_function(&function)) {
        (Ok(args), Ok(())) => args,
        (Err(mut errors), Err(more)) => {
            errors.combine(more);
            return Err(errors);
        }
        (Err(errors), Ok(())) | (Ok(_), Err(errors)) => return Err(errors),
    };
    let guard = guard(&args, &function.sig.ident, function.sig.receiver().is_some());
    function.block.stmts.insert(0, Stmt::Expr(Expr::Verbatim(guard), None));
    Ok(quote!(#function))
}

const NEEDS_RESULT: &str = "`#[rate_limit]` needs the function to return `Result<_, E>` with \
     `E: From<slidegate::RateLimited>` (a denial is returned as `Err`)";

/// The function must be `async` and return something `?` can return a
/// `RateLimited` through. Only what is certain from the syntax is rejected
/// here: a path type may be an alias of `Result`, which the type checker
/// then judges.
fn check_function(function: &ItemFn) -> syn::Result<()> {
    let sig = &function.sig;
    let mut errors: Option<syn::Error> = None;
    let mut push = |error: syn::Error| match &mut errors {
        Some(errors) => errors.combine(error),
        None => errors = Some(error),
    };
    if sig.asyncness.is_none() {
        push(syn::Error::new(
            sig.fn_token.span,
            "`#[rate_limit]` goes on an `async fn`: checking the limiter awaits the store",
        ));
    }
    match &sig.output {
        ReturnType::Default => {
            push(syn::Error::new(sig.ident.span(), format!("{NEEDS_RESULT}; this one returns `()`")))
        }
        ReturnType::Type(_, ty) => {
            if let Some(found) = not_a_result(ty) {
                push(syn::Error::new_spanned(ty, format!("{NEEDS_RESULT}; this one returns {found}")));
            }
        }
    }
    errors.map_or(Ok(()), Err)
}

/// What the return type is instead, when it certainly is not a `Result`.
fn not_a_result(ty: &Type) -> Option<&'static str> {
    match ty {
        Type::Paren(inner) => not_a_result(&inner.elem),
        Type::Group(inner) => not_a_result(&inner.elem),
        Type::Path(path) => {
            let last = path.path.segments.last()?;
            (path.qself.is_none() && last.ident == "Option").then_some("an `Option`")
        }
        Type::Tuple(tuple) if tuple.elems.is_empty() => Some("`()`"),
        Type::Tuple(_) => Some("a tuple"),
        Type::Reference(_) => Some("a reference"),
        Type::ImplTrait(_) => Some("an `impl Trait`"),
        Type::Never(_) => Some("`!`"),
        _ => None,
    }
}

/// Where an argument's code goes: at the argument, with the macro's hygiene.
fn at(expr: &Expr) -> Span {
    Span::call_site().located_at(expr.span())
}

/// `&(<expr>)`, at the expression. (On stable, a type error in it is
/// reported at the expression's first token.)
fn borrow(expr: &Expr) -> TokenStream {
    quote_spanned!(at(expr)=> &(#expr))
}

/// The check in front of the body; `method` when the function takes `self`
/// (so `Self` names its type).
fn guard(args: &Args, function: &Ident, method: bool) -> TokenStream {
    let limiter = borrow(&args.limiter);
    let limiter = quote_spanned!(at(&args.limiter)=>
        let __slidegate_limiter: &::slidegate::Limiter<_> = #limiter;
    );
    let (rule_static, rule) = match &args.rule {
        RuleArg::Given(expr) => {
            let borrowed = borrow(expr);
            let rule = quote_spanned!(at(expr)=> let __slidegate_rule: &::slidegate::Rule = #borrowed;);
            (
                TokenStream::new(),
                quote!(#rule let __slidegate_rule = ::core::result::Result::Ok(__slidegate_rule);),
            )
        }
        RuleArg::Inline(inline) => {
            let spec = spec(inline, function);
            // A method's derived name holds its type's (see `RuleCell::get_in`).
            let get = if method {
                quote!(__SLIDEGATE_RULE.get_in(::core::any::type_name::<Self>()))
            } else {
                quote!(__SLIDEGATE_RULE.get())
            };
            (
                quote!(
                    static __SLIDEGATE_RULE: ::slidegate::__private::RuleCell =
                        ::slidegate::__private::RuleCell::new(#spec);
                ),
                quote!(let __slidegate_rule = #get;),
            )
        }
    };
    // Two steps, so that a temporary (`format!(…)`) lives as long as the
    // key borrowed from it; the second, at the key, is where an unsupported
    // key type is reported.
    let borrowed = borrow(&args.key);
    let key = quote_spanned!(at(&args.key)=>
        let __slidegate_key_value = #borrowed;
        let __slidegate_key = ::slidegate::RateLimitKey::rate_limit_key(__slidegate_key_value);
    );
    let cost = match &args.cost {
        Some(cost) => quote_spanned!(at(cost)=> let __slidegate_cost: u32 = #cost;),
        None => quote!(let __slidegate_cost: u32 = 1;),
    };
    let message = match &args.message {
        Some(message) => quote!(::core::option::Option::Some(#message)),
        None => quote!(::core::option::Option::None),
    };
    quote! {
        {
            #rule_static
            #limiter
            #rule
            #key
            #cost
            ::slidegate::__private::check(
                __slidegate_limiter,
                __slidegate_rule,
                &__slidegate_key,
                __slidegate_cost,
                #message,
            )
            .await?;
        }
    }
}

/// The `RuleSpec` of an inline rule; an unnamed one is named after the
/// function's path, so its state is its own and survives restarts.
fn spec(rule: &InlineRule, function: &Ident) -> TokenStream {
    let limit = Literal::u32_unsuffixed(rule.limit);
    let window_ms = Literal::u64_unsuffixed(rule.window_ms);
    let algorithm = match rule.algorithm {
        Algorithm::Log => quote!(::slidegate::Algorithm::SlidingLog),
        Algorithm::Counter => quote!(::slidegate::Algorithm::SLIDING_COUNTER),
        Algorithm::Fixed => quote!(::slidegate::Algorithm::FixedWindow),
        Algorithm::Gcra => quote!(::slidegate::Algorithm::Gcra),
    };
    let name = match &rule.name {
        Some(name) => quote!(::slidegate::__private::RuleName::Given(#name)),
        None => {
            let function = function.unraw().to_string();
            quote!(::slidegate::__private::RuleName::Derived { module: ::core::module_path!(), function: #function })
        }
    };
    quote! {
        ::slidegate::__private::RuleSpec { limit: #limit, window_ms: #window_ms, algorithm: #algorithm, name: #name }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(attr: &str, item: &str) -> Result<String, String> {
        let attr: TokenStream = attr.parse().map_err(|e| format!("{e}"))?;
        let item: TokenStream = item.parse().map_err(|e| format!("{e}"))?;
        rate_limit(attr, item)
            .map(|t| t.to_string())
            .map_err(|e| e.into_iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))
    }

    #[test]
    fn the_guard_comes_first_and_the_body_is_kept() {
        let out = expand(
            r#"limiter = self.limiter, limit = 3, window = "10s", key = user"#,
            "pub async fn get(&self, user: String) -> Result<String, E> { Ok(user) }",
        )
        .unwrap();
        let check = out.find("__private :: check").unwrap();
        assert!(
            out.starts_with("pub async fn get (& self , user : String) -> Result < String , E >"),
            "{out}"
        );
        assert!(check < out.find("Ok (user)").unwrap(), "{out}");
        assert!(out.contains("limit : 3 , window_ms : 10000"), "{out}");
        assert!(out.contains("function : \"get\""), "{out}");
        assert!(out.contains("= & (self . limiter) ;"), "{out}");
    }

    #[test]
    fn a_given_rule_needs_no_static() {
        let out = expand(
            "limiter = L, rule = &RULE, key = k, cost = 2",
            "async fn f(k: u64) -> Result<(), E> { Ok(()) }",
        )
        .unwrap();
        assert!(!out.contains("static"), "{out}");
        assert!(out.contains("let __slidegate_cost : u32 = 2"), "{out}");
    }

    #[test]
    fn raw_function_names_are_unraw() {
        let out = expand(
            r#"limiter = L, limit = 1, window = "1s", key = k"#,
            "async fn r#type(k: u8) -> Result<(), E> { Ok(()) }",
        )
        .unwrap();
        assert!(out.contains("function : \"type\""), "{out}");
    }

    #[test]
    fn function_shape_is_checked_with_the_arguments() {
        let cases = [
            ("fn f() -> Result<(), E> { Ok(()) }", "goes on an `async fn`"),
            ("async fn f() { }", "this one returns `()`"),
            ("async fn f() -> Option<u8> { None }", "this one returns an `Option`"),
            ("async fn f() -> (u8, u8) { (1, 2) }", "this one returns a tuple"),
        ];
        for (item, needle) in cases {
            let error = expand("limiter = L, rule = R, key = k", item).unwrap_err();
            assert!(error.contains(needle), "{item}: {error}");
        }
        let both = expand("limiter = L, rule = R", "fn f() {}").unwrap_err();
        for needle in ["missing `key", "`async fn`", "returns `()`"] {
            assert!(both.contains(needle), "{both}");
        }
        assert!(
            expand("limiter = L, rule = R, key = k", "async fn f() -> io::Result<()> { Ok(()) }").is_ok()
        );
        assert!(expand("limiter = L, rule = R, key = k", "async fn f() -> ApiResult<u8> { Ok(1) }").is_ok());
    }
}
