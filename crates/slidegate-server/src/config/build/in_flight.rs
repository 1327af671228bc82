//! A `max_in_flight` limit's fields, in a rules file or a gateway's: at
//! most so many at once, each holding a lease for `lease_ttl` (renewed
//! while it runs) — no rate, window or cost of its own.

use std::time::Duration;

use serde_saphyr::Spanned;
use slidegate::limits::MAX_WINDOW;

use super::Builder;
use crate::config::IN_FLIGHT_TTL;
use crate::config::yaml::{LimitYaml, position};

impl Builder<'_> {
    /// The number and lease ttl of a `max_in_flight` limit written at
    /// `at`, or says what is wrong: the fields only a rate limit takes,
    /// and a `lease_ttl` that is no duration of 1 ms to 366 days.
    pub(in crate::config) fn in_flight(
        &mut self,
        yaml: &LimitYaml,
        max: &Spanned<u32>,
        at: (u32, u32),
    ) -> Option<(u32, Duration)> {
        let errors_before = self.errors.len();
        let refused = [
            ("requests_per_unit", yaml.requests_per_unit.as_ref().map(position)),
            ("unit", yaml.unit.as_ref().map(position)),
            ("window", yaml.window.as_ref().map(position)),
            ("algorithm", yaml.algorithm.as_ref().map(position)),
            ("penalty", yaml.penalty.as_deref().map(position)),
            ("budget", yaml.budget.as_ref().map(position)),
            ("unlimited", yaml.unlimited.as_ref().map(position)),
        ];
        for (field, given) in refused {
            if let Some(field_at) = given {
                self.error(
                    field_at,
                    format!(
                        "a `max_in_flight` limit counts the requests running at once: it takes no `{field}`"
                    ),
                );
            }
        }
        if yaml.shadow_mode.is_some() {
            self.error(
                at,
                "a `max_in_flight` limit takes no `shadow_mode` (`--shadow` admits every request)",
            );
        }
        if max.value == 0 {
            self.error(position(max), "`max_in_flight` must be at least 1");
        }
        let ttl = match &yaml.lease_ttl {
            None => Some(IN_FLIGHT_TTL),
            Some(text) => match humantime::parse_duration(text.value.trim()) {
                Ok(ttl) if ttl >= Duration::from_millis(1) && ttl <= MAX_WINDOW => Some(ttl),
                Ok(_) => {
                    self.error(
                        position(text),
                        format!("`lease_ttl: {}` must be 1ms to 366 days", text.value.trim()),
                    );
                    None
                }
                Err(e) => {
                    self.error(
                        position(text),
                        format!("`lease_ttl: {}`: {e} (expected a duration such as 30s or 5m)", text.value),
                    );
                    None
                }
            },
        };
        (self.errors.len() == errors_before).then_some((max.value, ttl?))
    }
}
