//! The attribute's arguments: each parsed with the kind of value it takes,
//! then checked together, so every mistake is reported at once and at the
//! argument that makes it.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Lit, LitInt, LitStr, Token};

use crate::errors::Errors;
use crate::inline_rule::{InlineRule, inline_rule};

const EXPECTED: &str = "limiter, rule, limit, window, algorithm, name, key, cost, message";

/// Everything `#[rate_limit(…)]` was given, valid as far as can be told
/// before type checking.
pub(crate) struct Args {
    /// `limiter = <expr>`: a `Limiter<S>` (or anything that derefs to one).
    pub(crate) limiter: Expr,
    /// Which rule to check.
    pub(crate) rule: RuleArg,
    /// `key = <expr>`: who is limited.
    pub(crate) key: Expr,
    /// `cost = <expr>`, a `u32`; 1 when absent.
    pub(crate) cost: Option<Expr>,
    /// `message = "…"`: the text of a denial.
    pub(crate) message: Option<LitStr>,
}

/// The rule: given as an expression, or written inline.
pub(crate) enum RuleArg {
    /// `rule = <expr>`: a `Rule`, `&Rule`, or anything that derefs to one.
    Given(Expr),
    /// `limit = …, window = "…"` with optional `algorithm` and `name`.
    Inline(InlineRule),
}

/// The kind of value each argument takes.
#[derive(Clone, Copy)]
enum Takes {
    Expr,
    Int,
    Str,
}

fn takes(name: &str) -> Option<Takes> {
    Some(match name {
        "limiter" | "rule" | "key" | "cost" => Takes::Expr,
        "limit" => Takes::Int,
        "window" | "algorithm" | "name" | "message" => Takes::Str,
        _ => return None,
    })
}

enum Value {
    Expr(Expr),
    Int(LitInt),
    Str(LitStr),
}

struct RawArg {
    name: Ident,
    value: Value,
}

impl Parse for RawArg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        // `parse_any` so that a keyword (`type = …`) is reported as an
        // unknown argument rather than as "expected identifier".
        let name = input.call(Ident::parse_any)?;
        let text = name.unraw().to_string();
        let Some(kind) = takes(&text) else {
            return Err(syn::Error::new(
                name.span(),
                format!("unknown argument `{text}`: expected one of {EXPECTED}"),
            ));
        };
        if !input.peek(Token![=]) {
            let example = match kind {
                Takes::Expr => "<expression>",
                Takes::Int => "<integer>",
                Takes::Str => "\"<text>\"",
            };
            return Err(syn::Error::new(name.span(), format!("expected `{text} = {example}`")));
        }
        input.parse::<Token![=]>()?;
        let value = match kind {
            Takes::Expr => Value::Expr(input.parse()?),
            Takes::Int if input.peek(LitInt) => Value::Int(input.parse()?),
            Takes::Int => {
                return Err(
                    input.error(format!("`{text}` takes a positive integer literal, e.g. `{text} = 10`"))
                );
            }
            Takes::Str if input.peek(LitStr) => Value::Str(input.parse()?),
            Takes::Str => return Err(input.error(str_hint(&text))),
        };
        Ok(RawArg { name, value })
    }
}

fn str_hint(name: &str) -> String {
    match name {
        "window" => r#"`window` takes a string literal such as "10s", "500ms", "1m", "1h" or "1d""#.into(),
        "algorithm" => r#"`algorithm` takes "log", "counter", "fixed" or "gcra""#.into(),
        _ => format!(r#"`{name}` takes a string literal: `{name} = "…"`"#),
    }
}

/// The arguments by name, each at most once.
#[derive(Default)]
struct Given {
    limiter: Option<Expr>,
    rule: Option<(Ident, Expr)>,
    limit: Option<(Ident, LitInt)>,
    window: Option<(Ident, LitStr)>,
    algorithm: Option<(Ident, LitStr)>,
    name: Option<(Ident, LitStr)>,
    key: Option<Expr>,
    cost: Option<Expr>,
    message: Option<LitStr>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let raw = Punctuated::<RawArg, Token![,]>::parse_terminated(input)?;
        let mut errors = Errors::default();
        let mut given = Given::default();
        let mut seen: Vec<String> = Vec::new();
        for RawArg { name, value } in raw {
            let text = name.unraw().to_string();
            if seen.contains(&text) {
                errors.at(name.span(), format!("duplicate argument `{text}`"));
                continue;
            }
            seen.push(text.clone());
            match (text.as_str(), value) {
                ("limiter", Value::Expr(e)) => given.limiter = Some(e),
                ("rule", Value::Expr(e)) => given.rule = Some((name, e)),
                ("key", Value::Expr(e)) => given.key = Some(e),
                ("cost", Value::Expr(e)) => given.cost = Some(e),
                ("limit", Value::Int(lit)) => given.limit = Some((name, lit)),
                ("window", Value::Str(lit)) => given.window = Some((name, lit)),
                ("algorithm", Value::Str(lit)) => given.algorithm = Some((name, lit)),
                ("name", Value::Str(lit)) => given.name = Some((name, lit)),
                ("message", Value::Str(lit)) => given.message = Some(lit),
                // `RawArg::parse` pairs each name with its kind of value.
                _ => errors.at(name.span(), format!("unexpected value for `{text}`")),
            }
        }
        let args = given.check(&mut errors);
        match (errors.into_error(), args) {
            (None, Some(args)) => Ok(args),
            (Some(error), _) => Err(error),
            (None, None) => Err(syn::Error::new(Span::call_site(), "invalid #[rate_limit] arguments")),
        }
    }
}

impl Given {
    fn check(self, errors: &mut Errors) -> Option<Args> {
        let here = Span::call_site();
        if self.limiter.is_none() {
            errors.at(
                here,
                "missing `limiter = <expr>`: the Limiter to check with, e.g. `limiter = LIMITER` or `limiter = self.limiter`",
            );
        }
        if self.key.is_none() {
            errors.at(here, "missing `key = <expr>`: who is limited, e.g. `key = user_id` or `key = format!(\"{}:{}\", a, b)`");
        }
        let rule = self.rule_arg(errors);
        if let (Some(Expr::Lit(lit)), Some(RuleArg::Inline(inline))) = (&self.cost, &rule)
            && let Lit::Int(int) = &lit.lit
            && let Ok(cost) = int.base10_parse::<u64>()
            && cost > u64::from(inline.limit)
        {
            errors.at(
                int.span(),
                format!("cost {cost} exceeds the limit {} and could never be admitted", inline.limit),
            );
        }
        if let Some(Expr::Lit(lit)) = &self.cost
            && let Lit::Int(int) = &lit.lit
            && int.base10_digits() == "0"
        {
            errors.at(int.span(), "cost must be at least 1");
        }
        Some(Args {
            limiter: self.limiter?,
            rule: rule?,
            key: self.key?,
            cost: self.cost,
            message: self.message,
        })
    }

    fn rule_arg(&self, errors: &mut Errors) -> Option<RuleArg> {
        if let Some((_, rule)) = &self.rule {
            let inline = [self.limit.as_ref().map(|(n, _)| n), self.window.as_ref().map(|(n, _)| n)];
            for name in inline.into_iter().flatten() {
                errors.at(
                    name.span(),
                    format!("`{name}` conflicts with `rule`: give either `rule = <expr>` or `limit = <n>, window = \"<duration>\"`"),
                );
            }
            for (name, _) in [&self.algorithm, &self.name].into_iter().flatten() {
                errors.at(
                    name.span(),
                    format!("`{name}` belongs to an inline rule (`limit`/`window`); set it on the Rule given as `rule`"),
                );
            }
            return Some(RuleArg::Given(rule.clone()));
        }
        match (&self.limit, &self.window) {
            (None, None) => {
                errors.at(
                    Span::call_site(),
                    "missing rule: give `rule = <expr>` (a Rule) or `limit = <n>, window = \"<duration>\"`",
                );
                None
            }
            (Some((name, _)), None) => {
                errors.at(name.span(), "`limit` needs a `window = \"<duration>\"`, e.g. `window = \"1m\"`");
                None
            }
            (None, Some((name, _))) => {
                errors.at(name.span(), "`window` needs a `limit = <n>`, e.g. `limit = 10`");
                None
            }
            (Some((_, limit)), Some((_, window))) => {
                let algorithm = self.algorithm.as_ref().map(|(_, lit)| lit);
                let name = self.name.as_ref().map(|(_, lit)| lit);
                inline_rule(limit, window, algorithm, name, errors).map(RuleArg::Inline)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::ToTokens;

    use super::*;
    use crate::inline_rule::Algorithm;

    fn parse(text: &str) -> syn::Result<Args> {
        syn::parse_str::<Args>(text)
    }

    fn error(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("{text} parsed"),
            Err(errors) => errors.into_iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"),
        }
    }

    fn tokens(expr: &Expr) -> String {
        expr.to_token_stream().to_string()
    }

    #[test]
    fn inline_rule_with_everything() {
        let args = parse(
            r#"limiter = self.limiter, limit = 5, window = "1m30s", algorithm = "gcra", name = "login",
               key = format!("{}:{}", a, b), cost = n * 2, message = "slow down""#,
        )
        .unwrap();
        assert_eq!(tokens(&args.limiter), "self . limiter");
        assert_eq!(tokens(&args.key), "format ! (\"{}:{}\" , a , b)");
        assert_eq!(args.cost.as_ref().map(tokens).as_deref(), Some("n * 2"));
        assert_eq!(args.message.map(|m| m.value()).as_deref(), Some("slow down"));
        let RuleArg::Inline(rule) = args.rule else { panic!("inline rule expected") };
        let expected = InlineRule {
            limit: 5,
            window_ms: 90_000,
            algorithm: Algorithm::Gcra,
            name: Some("login".into()),
        };
        assert_eq!(rule, expected);
    }

    #[test]
    fn given_rule_and_defaults() {
        let args = parse("limiter = &LIMITER, rule = &*LOGIN, key = user_id,").unwrap();
        let RuleArg::Given(rule) = &args.rule else { panic!("given rule expected") };
        assert_eq!(tokens(rule), "& * LOGIN");
        assert!(args.cost.is_none() && args.message.is_none());
        let RuleArg::Inline(rule) = parse(r#"limiter = l, key = k, limit = 1, window = "1s""#).unwrap().rule
        else {
            panic!("inline rule expected")
        };
        assert_eq!((rule.algorithm, rule.name), (Algorithm::Log, None));
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            (r#"limiter = l, key = k, limit = 0, window = "1s""#, "limit must be at least 1"),
            (r#"limiter = l, key = k, limit = 4294967296, window = "1s""#, "integer from 1 to 4294967295"),
            (
                r#"limiter = l, key = k, limit = "5", window = "1s""#,
                "`limit` takes a positive integer literal",
            ),
            (r#"limiter = l, key = k, limit = 5, window = "0s""#, "is zero"),
            (r#"limiter = l, key = k, limit = 5, window = 10"#, "`window` takes a string literal"),
            (
                r#"limiter = l, key = k, limit = 5, window = "1s", algorithm = "leaky""#,
                "unknown algorithm \"leaky\"",
            ),
            (r#"limiter = l, key = k, limit = 5, window = "5ms", algorithm = "counter""#, "at least 10ms"),
            (
                r#"limiter = l, key = k, limit = 4000000000, window = "366d", algorithm = "gcra""#,
                "below 2^53",
            ),
            (r#"limiter = l, key = k, limit = 5, window = "1s", name = "a b""#, "rule name must be"),
            (r#"limiter = l, limit = 5, window = "1s""#, "missing `key = <expr>`"),
            (r#"key = k, limit = 5, window = "1s""#, "missing `limiter = <expr>`"),
            ("limiter = l, key = k", "missing rule"),
            ("limiter = l, key = k, limit = 5", "`limit` needs a `window"),
            (r#"limiter = l, key = k, window = "1s""#, "`window` needs a `limit"),
            (r#"limiter = l, key = k, rule = r, limit = 5, window = "1s""#, "`limit` conflicts with `rule`"),
            (r#"limiter = l, key = k, rule = r, algorithm = "log""#, "`algorithm` belongs to an inline rule"),
            ("limiter = l, key = k, rule = r, keys = k", "unknown argument `keys`: expected one of limiter"),
            ("limiter = l, key = k, rule = r, type = k", "unknown argument `type`"),
            ("limiter = l, key = k, key = j, rule = r", "duplicate argument `key`"),
            ("limiter = l, key, rule = r", "expected `key = <expression>`"),
            (r#"limiter = l, key = k, limit = 5, window = "1s", cost = 0"#, "cost must be at least 1"),
            (r#"limiter = l, key = k, limit = 5, window = "1s", cost = 6"#, "cost 6 exceeds the limit 5"),
            ("limiter = l, key = k, rule = r, message = m", "`message` takes a string literal"),
        ];
        for (text, needle) in cases {
            let message = error(text);
            assert!(message.contains(needle), "{text}\n  gave: {message}\n  expected: {needle}");
        }
    }

    #[test]
    fn all_mistakes_are_reported_together() {
        let message = error(r#"limit = 0, window = "1 s""#);
        for needle in ["missing `limiter", "missing `key", "limit must be at least 1", "unknown unit"] {
            assert!(message.contains(needle), "{message} lacks {needle}");
        }
    }
}
