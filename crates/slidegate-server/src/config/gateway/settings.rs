//! The gateway file's top-level settings, checked: trusted proxies, the
//! client address header, timeouts and caps.

use std::time::Duration;

use http::StatusCode;
use serde_saphyr::Spanned;
use slidegate_tower::ForwardedHeader;

use super::yaml::GatewayYaml;
use super::{MAX_HEADER_BYTES, MIN_HEADER_BYTES, Settings};
use crate::config::build::Builder;
use crate::config::yaml::{Scalar, position};

/// A whole number in `range`, or a message naming `what`.
fn whole(
    builder: &mut Builder<'_>,
    value: &Spanned<Scalar>,
    what: &str,
    range: std::ops::RangeInclusive<i128>,
) -> Option<i128> {
    match value.value.whole() {
        Ok(n) if range.contains(&n) => Some(n),
        Ok(n) => {
            builder.error(
                position(value),
                format!("`{what}` must be from {} to {}, got {n}", range.start(), range.end()),
            );
            None
        }
        Err(text) => {
            builder.error(position(value), format!("`{what}` must be a whole number, got `{text}`"));
            None
        }
    }
}

fn duration(builder: &mut Builder<'_>, value: &Spanned<String>, what: &str) -> Option<Duration> {
    match humantime::parse_duration(value.value.trim()) {
        Ok(d) if !d.is_zero() && d <= Duration::from_secs(24 * 3600) => Some(d),
        Ok(_) => {
            builder.error(position(value), format!("`{what}` must be longer than zero and at most 24h"));
            None
        }
        Err(e) => {
            builder.error(
                position(value),
                format!("`{what}: {}`: {e} (expected a duration such as 500ms, 5s or 1m)", value.value),
            );
            None
        }
    }
}

pub(super) fn settings(builder: &mut Builder<'_>, yaml: &GatewayYaml) -> Settings {
    let mut settings = Settings::default();
    if let Some(proxies) = &yaml.trusted_proxies {
        for proxy in proxies {
            match slidegate_tower::ClientIp::trusting([proxy.value.as_str()]) {
                Ok(_) => settings.trusted_proxies.push(proxy.value.trim().to_owned()),
                Err(message) => builder.error(position(proxy), message),
            }
        }
    }
    if let Some(header) = &yaml.client_ip_header {
        match header.value.trim().to_ascii_lowercase().as_str() {
            "x-forwarded-for" => settings.client_ip_header = ForwardedHeader::XForwardedFor,
            "forwarded" => settings.client_ip_header = ForwardedHeader::Forwarded,
            "x-real-ip" => settings.client_ip_header = ForwardedHeader::XRealIp,
            other => builder.error(
                position(header),
                format!(
                    "unknown `client_ip_header: {other}`: expected x-forwarded-for, forwarded or x-real-ip"
                ),
            ),
        }
    }
    if let Some(prefix) = &yaml.ipv6_prefix
        && let Some(bits) = whole(builder, prefix, "ipv6_prefix", 1..=128)
    {
        settings.ipv6_prefix = u8::try_from(bits).unwrap_or(128);
    }
    if let Some(status) = &yaml.ban_status {
        match status.value.whole() {
            Ok(429) => settings.ban_status = StatusCode::TOO_MANY_REQUESTS,
            Ok(403) => settings.ban_status = StatusCode::FORBIDDEN,
            Ok(code) => {
                builder.error(position(status), format!("`ban_status` must be 429 or 403, got {code}"))
            }
            Err(text) => {
                builder.error(position(status), format!("`ban_status` must be 429 or 403, got `{text}`"))
            }
        }
    }
    if let Some(message) = &yaml.message {
        if message.value.trim().is_empty() || message.value.len() > 1024 {
            builder.error(position(message), "`message` must be 1 to 1024 bytes of text");
        } else {
            settings.message = message.value.clone();
        }
    }
    for (value, what, slot) in [
        (&yaml.connect_timeout, "connect_timeout", &mut settings.connect_timeout),
        (&yaml.response_timeout, "response_timeout", &mut settings.response_timeout),
        (&yaml.upstream_down_for, "upstream_down_for", &mut settings.upstream_down_for),
    ] {
        if let Some(value) = value
            && let Some(d) = duration(builder, value, what)
        {
            *slot = d;
        }
    }
    if let Some(cap) = &yaml.max_connections_per_ip
        && let Some(n) = whole(builder, cap, "max_connections_per_ip", 0..=1_000_000)
    {
        settings.max_connections_per_ip = u32::try_from(n).unwrap_or(0);
    }
    if let Some(bytes) = &yaml.max_header_bytes {
        let range =
            i128::try_from(MIN_HEADER_BYTES).unwrap_or(0)..=i128::try_from(MAX_HEADER_BYTES).unwrap_or(0);
        if let Some(n) = whole(builder, bytes, "max_header_bytes", range) {
            settings.max_header_bytes = usize::try_from(n).unwrap_or(MIN_HEADER_BYTES);
        }
    }
    settings
}
