//! The status page in a real browser: Debian's chromium, headless, against
//! a live service with traffic flowing. What the page shows once its
//! scripts have run (`--dump-dom`), with no limits, with hundreds, and
//! with hostile identities (shown as text, never run); a screenshot under
//! target/ a person can open.

mod support;

use std::path::Path;
use std::process::Command;

use support::{post_json, start};

/// Runs headless chromium on `url` with `args`; returns its standard output.
fn browse(url: &str, args: &[&str], profile: &Path) -> String {
    let output = Command::new(support::chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        // The page fetches its data after load: virtual time runs until
        // the network is idle, within this budget.
        .arg("--virtual-time-budget=5000")
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(output.status.success(), "chromium failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `service`'s page as chromium leaves it once its scripts have drawn
/// the stats (asserted).
async fn dom_of(service: &support::Service) -> String {
    dom_at(service, "/").await
}

/// [`dom_of`] the page at `path` (with a fragment, a view of its tables).
async fn dom_at(service: &support::Service, path: &str) -> String {
    let url = service.url(path);
    let dom = tokio::task::spawn_blocking(move || {
        let profile = tempfile::tempdir().expect("profile dir");
        browse(&url, &["--dump-dom"], profile.path())
    })
    .await
    .expect("chromium");
    assert!(dom.contains("data-loaded=\"true\""), "{}", &dom[..dom.len().min(2000)]);
    dom
}

/// Rules of domain `api`: `user`, 2 a minute, and `route0` … `route{n-1}`,
/// `i + 1` an hour each.
fn rules_with_routes(n: usize) -> String {
    let mut rules = String::from(
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 2 }\n",
    );
    for i in 0..n {
        rules.push_str(&format!(
            "  - key: route{i}\n    rate_limit: {{ unit: hour, requests_per_unit: {} }}\n",
            i + 1
        ));
    }
    rules
}

fn check(domain: &str, key: &str, value: &str) -> String {
    serde_json::json!({"domain": domain, "descriptors": [{"entries": [{"key": key, "value": value}]}]})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_limits_rates_and_hostile_identities_as_text() {
    // Hundreds of rules.
    let service = start(&rules_with_routes(300)).await;
    let hostile = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">";
    for user in ["alice", hostile] {
        for _ in 0..4 {
            post_json(&service.url("/v1/check"), &check("api", "user", user)).await;
        }
    }
    let url = service.url("/");
    let profile = tempfile::tempdir().expect("profile dir");
    let dom = tokio::task::spawn_blocking({
        let (url, profile) = (url.clone(), profile.path().to_owned());
        move || browse(&url, &["--dump-dom"], &profile)
    })
    .await
    .expect("chromium");

    assert!(
        dom.contains("data-loaded=\"true\""),
        "the scripts ran and drew the stats: {}",
        &dom[..dom.len().min(2000)]
    );
    assert!(dom.contains("<title>slidegate</title>"), "no script changed the title");
    assert_eq!(dom.matches("<script").count(), 1, "only the page's own script element");
    assert!(!dom.contains("<img src=\"x\""), "no element from an identity");
    // The identity is shown, as text.
    assert!(
        dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;"),
        "hostile identity shown escaped"
    );
    assert!(dom.contains("api: user=alice"));
    // When each was last limited, and its wait counted down from then.
    assert!(dom.contains(" s ago</td>"), "last limited");
    assert!(dom.contains("of which maybe others'"), "no jargon in the header");
    assert_eq!(dom.matches("data-key=\"api.route").count(), 300, "every rule has its row");
    assert!(dom.contains("data-key=\"api.user\""));
    assert!(dom.contains("class=\"spark\""), "charts drawn");
    // With their scale; five idle minutes are one grey line, not a red one.
    assert!(dom.contains("class=\"spark idle\""), "idle charts marked");
    assert!(dom.contains("<span class=\"scale muted\">peak "), "a busy chart's peak");
    assert!(dom.contains("<span class=\"scale muted\">idle</span>"), "an idle chart says so");

    // A screenshot a person can open.
    let shot = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/status-page.png");
    let arg = format!("--screenshot={}", shot.display());
    let profile = tempfile::tempdir().expect("profile dir");
    tokio::task::spawn_blocking({
        let profile = profile.path().to_owned();
        move || browse(&url, &[&arg, "--window-size=1280,1000"], &profile)
    })
    .await
    .expect("chromium");
    let size = std::fs::metadata(&shot).expect("the screenshot").len();
    assert!(size > 10_000, "a real picture, {size} bytes");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_correct_with_no_limits() {
    let service = start("domain: empty\ndescriptors: []\n").await;
    let dom = dom_of(&service).await;
    assert!(
        dom.contains("<p id=\"no-limits\" class=\"muted\">No limits are configured.</p>"),
        "shown, not hidden"
    );
    assert!(dom.contains("Nothing limited yet."));
    assert!(dom.contains("<section id=\"misses-section\" hidden=\"\">"), "nothing missed: no section");
    assert!(dom.contains("<section id=\"admin\" hidden=\"\">"), "no admin API: no admin box");
    assert!(dom.contains("<p id=\"reload-banner\" class=\"banner\" hidden=\"\">"), "no failed reload");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the host's name");
    let version = format!("slidegate {} on {}, up 0 min", env!("CARGO_PKG_VERSION"), host.trim());
    assert!(dom.contains(&version), "version, instance and uptime");
    assert!(
        dom.contains("<a id=\"misses-count\" class=\"bad\" href=\"#misses-section\" hidden=\"\">"),
        "nothing missed"
    );
    for edge in ["rls", "http", "gateway"] {
        assert!(dom.contains(&format!("<tr data-edge=\"{edge}\">")), "a row per edge: {edge}");
    }
    assert!(dom.contains("0/s now, 0 in the last 5 min, 0 since start"), "degraded answers as a rate");
    service.stop().await;
}

/// Every table sorts and filters; the view is in the address's fragment,
/// so it survives the refresh and a link shares it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tables_sort_and_filter_as_the_address_says() {
    let service = start(&rules_with_routes(10)).await;
    // By limit (the fourth column), largest first, routes only.
    let dom = dom_at(&service, "/#limits.sort=3&limits.desc=1&limits.filter=route").await;
    let at = |key: &str| dom.find(&format!("data-key=\"{key}\"")).unwrap_or_else(|| panic!("no row {key}"));
    let order: Vec<usize> = (0..10).rev().map(|i| at(&format!("api.route{i}"))).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "route9 (10/h) first, route0 (1/h) last: {order:?}");
    assert!(dom.contains("<tr data-key=\"api.user\" hidden=\"\">"), "filtered out");
    assert!(!dom.contains("<tr data-key=\"api.route3\" hidden"), "kept");
    assert!(dom.contains("10 of 11 shown"), "the count");
    assert!(dom.contains("data-sorted=\"desc\""), "the sorted column is marked");
    service.stop().await;
}

/// A caller's domain the rules do not define shows on the page, with how
/// often it was asked for; so does a descriptor no limit matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_lists_what_the_rules_do_not_know() {
    let service = start(
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 2 }\n",
    )
    .await;
    for _ in 0..3 {
        post_json(&service.url("/v1/check"), &check("apii", "user", "u")).await;
    }
    post_json(&service.url("/v1/check"), &check("api", "usr", "u")).await;
    let dom = dom_of(&service).await;
    assert!(dom.contains("<section id=\"misses-section\">"), "shown");
    assert!(dom.contains("<td>unknown domain</td><td class=\"identity\">apii</td><td>3</td>"), "{dom}");
    assert!(dom.contains("<td>no limit matches</td><td class=\"identity\">api: usr</td><td>1</td>"), "{dom}");
    assert!(
        dom.contains(
            "href=\"#misses-section\">3 requests for unknown domains, 1 request matching no limit</a>"
        ),
        "counted in the header: {dom}"
    );
    service.stop().await;
}

/// A Redis that was down when the service started: the page says the
/// store is disconnected, and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_says_when_the_store_is_disconnected() {
    let nowhere = format!("redis://127.0.0.1:{}/", slidegate_testkit::free_port().expect("port"));
    let store =
        slidegate_redis::RedisStore::builder(nowhere).lazy(true).connect().await.expect("a lazy store");
    let service = support::start_with(
        "domain: api\ndescriptors: []\n",
        slidegate_server::ServiceStore::Redis(store),
        |_| {},
    )
    .await;
    let dom = dom_of(&service).await;
    assert!(
        dom.contains(
            "<dd id=\"store-connection\" class=\"bad\">disconnected: connecting to redis://127.0.0.1:"
        ),
        "{}",
        &dom[..dom.len().min(3000)]
    );
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_assets_carry_a_strict_policy() {
    let service = start("domain: api\ndescriptors: []\n").await;
    for (path, kind) in [("/", "text/html"), ("/ui/page.js", "text/javascript"), ("/ui/page.css", "text/css")]
    {
        let (status, headers, body) = support::http("GET", &service.url(path), "", &[]).await;
        assert_eq!(status, 200, "{path}");
        assert!(headers["content-type"].to_str().unwrap().starts_with(kind), "{path}: {headers:?}");
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("default-src 'none'") && policy.contains("script-src 'self'"), "{policy}");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        // Nothing loaded from elsewhere (the SVG namespace is a name, not a fetch).
        for outside in ["src=\"http", "href=\"http", "url(http", "fetch(\"http", "//cdn"] {
            assert!(!body.contains(outside), "{path}: nothing from the internet ({outside})");
        }
    }
    service.stop().await;
}

/// A budget's use and debt and a `max_in_flight` limit's leases running
/// are shown for the identities seen last, in `/v1/stats` and on the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_budgets_in_debt_and_leases_running() {
    let rules = "domain: llm\ndescriptors:\n  - key: tenant\n    rate_limit: { name: tokens, unit: minute, requests_per_unit: 1000, budget: true }\n  - key: exports\n    rate_limit: { name: exports, max_in_flight: 3 }\n";
    let service = start(rules).await;
    let charge = serde_json::json!({"domain": "llm", "descriptors": [{"entries": [{"key": "tenant", "value": "acme"}], "hits_addend": 1400}]});
    post_json(&service.url("/v1/charge"), &charge.to_string()).await;
    let acquire = check("llm", "exports", "alice");
    for _ in 0..2 {
        assert_eq!(post_json(&service.url("/v1/acquire"), &acquire).await.0, 200);
    }
    let (_, _, text) = support::http("GET", &service.url("/v1/stats"), String::new(), &[]).await;
    let stats: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let usage = |name: &str| {
        let limits = stats["limits"].as_array().expect("limits");
        let limit = limits.iter().find(|l| l["limit"]["name"] == name).expect("the limit");
        limit["usage"][0].clone()
    };
    assert_eq!((usage("tokens")["used"].as_u64(), usage("tokens")["debt"].as_u64()), (Some(1400), Some(400)));
    assert_eq!(usage("tokens")["identity"], "llm: tenant=acme");
    assert_eq!(usage("exports")["used"].as_u64(), Some(2), "two running");

    let dom = dom_of(&service).await;
    let in_use: Vec<&str> =
        dom.split("class=\"in-use\"").skip(1).map(|cell| cell.split("</td>").next().unwrap_or("")).collect();
    // When, as the page's clock (virtual time, run ahead) says.
    let shown = |prefix: &str| in_use.iter().any(|cell| cell.contains(prefix) && cell.ends_with(" s ago"));
    assert!(shown(">llm: tenant=acme 1400 of 1000 (debt 400), "), "{in_use:?}");
    assert!(shown(">llm: exports=alice 2 of 3, "), "{in_use:?}");
    service.stop().await;
}
