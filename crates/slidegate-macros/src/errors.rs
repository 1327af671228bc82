//! Errors of the attribute's arguments, collected so all are reported at once.

use proc_macro2::Span;

/// Collects errors so that all of them are reported together.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// The errors collected, combined into one (`None`: there were none).
    pub(crate) fn into_error(self) -> Option<syn::Error> {
        self.0
    }
}
