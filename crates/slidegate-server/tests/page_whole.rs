//! The whole status page as an operator meets it: one service with every
//! edge (RLS, the HTTP API, a gateway) and an admin token, traffic on each,
//! a banned identity, an upstream that is down, requests the rules do not
//! know and a failed reload — checked in headless chromium, and
//! screenshotted to `target/status-page.png` for a person to look at.
//!
//! Every wait is bounded (a bound on hangs, never a timing assertion).

#[path = "support/devtools.rs"]
mod devtools;
#[path = "support/edges.rs"]
mod edges;
mod support;

use devtools::{Page, Traffic, target_dir};
use edges::Edges;
use serde_json::{Value, json};
use slidegate::MemoryStore;
use slidegate_server::ServiceStore;
use slidegate_testkit::Upstream;

const TOKEN: &str = "the-right-admin-token-0123456789";

/// Two an hour per user; a user over it twice more in ten minutes is
/// banned for an hour.
const RULES: &str = "domain: api
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: hour
      requests_per_unit: 2
      penalty: { window: 10m, ban_after: 2, ban_for: 1h }
";

fn gateway_yaml(upstream: &str, closed: &str) -> String {
    format!(
        "routes:
  - name: login
    path_prefix: /login
    upstreams: [http://{upstream}]
    limits:
      - {{ key: client_ip, requests_per_unit: 2, unit: hour }}
  - name: broken
    path_prefix: /broken
    upstreams: [http://{closed}]
  - name: site
    path_prefix: /
    upstreams: [http://{upstream}]
"
    )
}

fn check_body(domain: &str, user: &str) -> String {
    json!({ "domain": domain, "descriptors": [{ "entries": [{ "key": "user", "value": user }] }] })
        .to_string()
}

/// The text of every cell of `table`'s rows, by row.
async fn rows(page: &mut Page, table: &str) -> Vec<Vec<String>> {
    let found = page
        .eval(&format!(
            "[...document.querySelectorAll('#{table} tbody tr')].map(r => [...r.cells].map(c => c.textContent))"
        ))
        .await;
    serde_json::from_value(found).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_page_shows_every_edge_a_ban_a_down_upstream_and_a_failed_reload() {
    let up = Upstream::start();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let gateway = gateway_yaml(&up.addr().to_string(), &closed.to_string());
    let edges = Edges::start(ServiceStore::Memory(MemoryStore::new()), RULES, &gateway, |c| {
        c.admin_token = Some(TOKEN.into());
        c.watch = false;
    })
    .await;

    // RLS: mallory keeps going past her limit until she is banned; alice
    // stays within hers.
    let rls = |user: &str| support::rls("api", &[&[("user", user)]]);
    let mut mallory = Vec::new();
    for _ in 0..6 {
        mallory.push(edges.rls(rls("mallory")).await.expect("RLS").overall_code);
    }
    assert_eq!(mallory[..3], [support::OK, support::OK, support::OVER_LIMIT], "{mallory:?}");
    assert_eq!(edges.rls(rls("alice")).await.expect("RLS").overall_code, support::OK);
    // The HTTP API: bob over his limit; a domain the rules do not know.
    for _ in 0..3 {
        edges.check(&check_body("api", "bob")).await;
    }
    edges.check(&check_body("apii", "bob")).await;
    // The gateway: logins over their limit, a route whose upstream is down.
    let statuses = [edges.gateway_get("/login").await.0, edges.gateway_get("/login").await.0];
    assert_eq!(statuses, [200, 200]);
    assert_eq!(edges.gateway_get("/login").await.0, 429);
    assert_eq!(edges.gateway_get("/broken").await.0, 502);
    // And traffic keeps flowing on every edge.
    let _traffic = Traffic::start({
        let (check, login, site) =
            (edges.url("/v1/check"), edges.gateway_url("/login"), edges.gateway_url("/"));
        move || {
            let (check, login, site) = (check.clone(), login.clone(), site.clone());
            async move {
                support::http("POST", &check, check_body("api", "carol"), &[]).await;
                support::http("GET", &login, "", &[]).await;
                support::http("GET", &site, "", &[]).await;
            }
        }
    });

    // A reload that fails: the rules in force stay, the page says so.
    support::write(
        &edges.dir.path().join("rules.yaml"),
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight }\n",
    );
    let (status, _, body) =
        support::http("POST", &edges.url("/v1/reload"), "", &[("authorization", &format!("Bearer {TOKEN}"))])
            .await;
    assert_eq!(status, 422, "{body}");

    let mut page = Page::open(&edges.url("/")).await;
    page.call(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": false }),
    )
    .await;
    page.wait_for("the page drawn from /v1/stats", "document.body.dataset.loaded === 'true'").await;
    page.type_into("#token", TOKEN).await;
    page.click("#token-form button[type=submit]").await;
    page.wait_for(
        "every part filled",
        "document.getElementById('reload-banner').checkVisibility()
           && document.getElementById('misses-count').checkVisibility()
           && [...document.querySelectorAll('#top tbody tr')].some(r => r.cells[2].textContent.startsWith('banned until'))
           && [...document.querySelectorAll('#top tbody tr')].some(r => r.querySelector('button.reset-row'))
           && document.querySelector('#routes tr[data-route=broken] td.upstream-errors')?.textContent.startsWith('1 of')
           && ['rls', 'http', 'gateway'].every(edge =>
                !document.querySelector('#edges tr[data-edge=' + edge + '] td:nth-child(4)').textContent.startsWith('0 admitted'))",
    )
    .await;

    // The most limited identities: who, by which limit, in which state.
    let top = rows(&mut page, "top").await;
    let row = |identity: &str| top.iter().find(|r| r[0] == identity).cloned().unwrap_or_default();
    let mallory = row("api: user=mallory");
    assert_eq!(mallory[1], "per_user", "{top:?}");
    assert!(mallory[2].starts_with("banned until "), "{mallory:?}");
    let bob = row("api: user=bob");
    assert_eq!((bob[1].as_str(), bob[2].as_str(), bob[3].as_str()), ("per_user", "limited", "1"), "{bob:?}");
    let login = row("gateway: route=login, client_ip=127.0.0.1");
    assert_eq!(login[1], "login.client_ip", "a gateway limit by its rule's name: {top:?}");
    // Requests by edge, and the banner, the misses, the upstream's health.
    let edges_rows = rows(&mut page, "edges").await;
    let rls_row = edges_rows.iter().find(|r| r[0].starts_with("RLS")).expect("an RLS row");
    assert!(rls_row[3].contains("admitted") && !rls_row[3].starts_with("0 admitted"), "{rls_row:?}");
    let banner = page.text("#reload-banner").await;
    assert!(banner.contains("fortnight") && banner.contains("still in force"), "{banner}");
    let misses = page.text("#misses-count").await;
    assert!(misses.starts_with("1 request for unknown domains"), "{misses}");
    let broken = page.text("#routes tr[data-route=broken] td.upstream-errors").await;
    assert!(broken.starts_with("1 of 1"), "{broken}");
    let login_latency = page.text("#routes tr[data-route=login] td:nth-child(12)").await;
    assert!(login_latency.contains(" / "), "the upstream's answer times: {login_latency}");

    // Reset mallory from her row: her ban is lifted.
    page.eval(
        "[...document.querySelectorAll('#top tbody tr')].find(r => r.cells[0].textContent === 'api: user=mallory')
           .querySelector('button.reset-row').click()",
    )
    .await;
    page.wait_for(
        "the reset's answer",
        "document.getElementById('admin-result').textContent.startsWith('200')",
    )
    .await;
    let answer = page.text("#admin-result").await;
    let answer: Value = serde_json::from_str(answer.trim_start_matches("200 ")).expect("JSON answer");
    assert_eq!(answer["limits"], 1, "{answer}");
    assert_eq!(
        edges.rls(rls("mallory")).await.expect("RLS").overall_code,
        support::OK,
        "mallory is admitted again"
    );
    page.wait_for(
        "mallory's row says her counters were reset",
        "[...document.querySelectorAll('#top tbody tr')].find(r => r.cells[0].textContent === 'api: user=mallory')
           ?.cells[2].textContent === 'reset by an operator'",
    )
    .await;
    // And a gateway identity's row resets the gateway's counter.
    page.eval(
        "[...document.querySelectorAll('#top tbody tr')]
           .find(r => r.cells[0].textContent === 'gateway: route=login, client_ip=127.0.0.1')
           .querySelector('button.reset-row').click()",
    )
    .await;
    page.wait_for(
        "the gateway reset's answer",
        "document.getElementById('admin-result').textContent.includes('\"limits\":1')
           && document.getElementById('admin-result').textContent.includes('\"reset\":1')",
    )
    .await;

    // A screenshot a person can open.
    let png = page.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(png.len() > 10_000, "a real picture, {} bytes", png.len());
    let dir = target_dir();
    std::fs::create_dir_all(&dir).expect("target dir");
    std::fs::write(dir.join("status-page.png"), &png).expect("write the screenshot");
}
