//! The status page driven like a person drives it: Debian's chromium,
//! headless, steered over the Chrome DevTools Protocol (a small client,
//! `support/devtools.rs`), against a live service with traffic
//! flowing. The admin section: hidden until a token is entered; a wrong
//! token is refused and changes nothing; the right one resets a blocked
//! user's counters and reloads the rules (with the watcher off, so only
//! the click can have), and a broken file is refused on the page; an
//! action that cannot reach the service says so. And a gateway's routes,
//! with their rates, and a screenshot of it under target/.
//!
//! Every wait is bounded (a bound on hangs, never a timing assertion).

#[path = "support/devtools.rs"]
mod devtools;
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use devtools::{Page, Traffic, target_dir};
use serde_json::{Value, json};
use slidegate::MemoryStore;
use slidegate_server::{Listeners, ServerConfig, ServiceStore, serve};
use slidegate_testkit::Upstream;
use support::{Service, http, post_json, start_with};
use tokio::net::TcpListener;

const TOKEN: &str = "the-right-admin-token-0123456789";
const WRONG_TOKEN: &str = "a-wrong-admin-token-9876543210";

// ---------------------------------------------------------------------------
// The admin section.

/// Two an hour per user: a blocked user stays blocked for the whole test
/// unless reset.
const RULES: &str = "domain: api
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 2 }
";

/// The same with five an hour.
const RULES_FIVE: &str = "domain: api
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
";

fn check_body(user: &str) -> String {
    json!({ "domain": "api", "descriptors": [{ "entries": [{ "key": "user", "value": user }] }] }).to_string()
}

/// The `user` limit and the hash `/v1/rules` shows.
async fn rules_in_force(service: &Service) -> (Value, String) {
    let (status, _, text) = http("GET", &service.url("/v1/rules"), Vec::new(), &[]).await;
    assert_eq!(status, 200, "{text}");
    let rules: Value = serde_json::from_str(&text).expect("rules JSON");
    let descriptors = rules["domains"][0]["descriptors"].as_array().expect("descriptors");
    let user = descriptors.iter().find(|d| d["key"] == "user").expect("the user descriptor");
    (user["limits"][0].clone(), rules["hash"].as_str().expect("hash").to_owned())
}

/// Empties `#admin-result`, so that the next answer is told from the last.
async fn clear_result(page: &mut Page) {
    page.eval("document.getElementById('admin-result').textContent = ''").await;
}

/// Waits for an answer in `#admin-result`; its status and body.
async fn admin_result(page: &mut Page) -> (u16, String) {
    page.wait_for("an answer in #admin-result", "document.getElementById('admin-result').textContent !== ''")
        .await;
    let text = page.text("#admin-result").await;
    let (status, body) = text.split_once(' ').unwrap_or_else(|| panic!("status and body: {text:?}"));
    (status.parse().unwrap_or_else(|_| panic!("a status first: {text:?}")), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_actions_need_the_right_token_and_reset_and_reload_from_the_page() {
    let service = start_with(RULES, ServiceStore::Memory(MemoryStore::new()), |c| {
        c.admin_token = Some(TOKEN.into());
        // Only the page's click may reload.
        c.watch = false;
    })
    .await;
    let check = service.url("/v1/check");
    // Traffic flowing: alice, all along (blocked after two).
    let _traffic = Traffic::start({
        let check = check.clone();
        move || {
            let check = check.clone();
            async move {
                post_json(&check, &check_body("alice")).await;
            }
        }
    });
    // Bob is blocked.
    for _ in 0..2 {
        assert_eq!(post_json(&check, &check_body("bob")).await.0, 200);
    }
    let (status, _, answer) = post_json(&check, &check_body("bob")).await;
    assert_eq!((status, &answer["allowed"]), (429, &json!(false)), "bob is over the limit: {answer}");
    let (limit, old_hash) = rules_in_force(&service).await;
    assert_eq!(limit["requests_per_unit"], 2);

    let mut page = Page::open(&service.url("/")).await;
    page.wait_for("the page drawn from /v1/stats", "document.body.dataset.loaded === 'true'").await;
    page.wait_for(
        "the user limit's row",
        "document.querySelector('#limits tr[data-key=\"api.user\"] td:nth-child(4)')?.textContent === '2'",
    )
    .await;

    // Before a token: no admin actions.
    let hidden = page
        .eval(
            "document.getElementById('admin-actions').hidden
               && !document.getElementById('reload').checkVisibility()
               && !document.getElementById('reset-form').checkVisibility()",
        )
        .await;
    assert_eq!(hidden, true, "no admin actions before a token is entered");
    assert_eq!(page.eval("document.getElementById('token').checkVisibility()").await, true);

    // A new rules file on disk; nothing reloads it but the button.
    support::write(&service.rules, RULES_FIVE);

    // A wrong token: the actions show (the service decides), and are refused.
    page.type_into("#token", WRONG_TOKEN).await;
    page.click("#token-form button[type=submit]").await;
    page.wait_for("the admin actions", "document.getElementById('reload').checkVisibility()").await;
    assert_eq!(page.eval("document.getElementById('reset-form').checkVisibility()").await, true);
    clear_result(&mut page).await;
    page.click("#reload").await;
    let (status, body) = admin_result(&mut page).await;
    assert!(status == 401 || status == 403, "a wrong token is refused: {status} {body}");
    page.type_into("#reset-domain", "api").await;
    page.type_into("#reset-entries", "user=bob").await;
    clear_result(&mut page).await;
    page.click("#reset-form button[type=submit]").await;
    let (status, body) = admin_result(&mut page).await;
    assert!(status == 401 || status == 403, "a wrong token is refused: {status} {body}");
    // Nothing changed.
    let (limit, hash) = rules_in_force(&service).await;
    assert_eq!((&limit["requests_per_unit"], &hash), (&json!(2), &old_hash), "no reload");
    let (status, _, answer) = post_json(&service.url("/v1/peek"), &check_body("bob")).await;
    assert_eq!(status, 429, "bob is still blocked: {answer}");

    // The right token.
    page.type_into("#token", TOKEN).await;
    page.click("#token-form button[type=submit]").await;
    page.wait_for("the admin actions", "document.getElementById('reload').checkVisibility()").await;

    // a. Reset bob from his row among the most limited identities.
    page.wait_for(
        "bob's row with its reset button",
        "[...document.querySelectorAll('#top tbody tr')].some(r => r.cells[0].textContent === 'api: user=bob'
           && r.querySelector('button.reset-row'))",
    )
    .await;
    let row = page
        .eval(
            "[...document.querySelectorAll('#top tbody tr')].filter(r => r.cells[0].textContent === 'api: user=bob')
               .map(r => [r.cells[1].textContent, r.cells[2].textContent])[0]",
        )
        .await;
    assert_eq!(row, json!(["api.user", "limited"]), "bob's limit (named by its descriptor) and state");
    clear_result(&mut page).await;
    page.eval(
        "[...document.querySelectorAll('#top tbody tr')].find(r => r.cells[0].textContent === 'api: user=bob')
           .querySelector('button.reset-row').click()",
    )
    .await;
    let (status, body) = admin_result(&mut page).await;
    assert_eq!(status, 200, "the reset is done: {body}");
    let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("JSON answer: {e}: {body}"));
    assert_eq!(
        (&answer["result"], &answer["limits"], &answer["reset"]),
        (&json!("ok"), &json!(1), &json!(1)),
        "{answer}"
    );
    let (status, _, answer) = post_json(&check, &check_body("bob")).await;
    assert_eq!(
        (status, answer["descriptors"][0]["remaining"].as_u64()),
        (200, Some(1)),
        "bob has a full quota again: {answer}"
    );
    let (status, _, answer) = post_json(&service.url("/v1/peek"), &check_body("alice")).await;
    assert_eq!(status, 429, "alice keeps her count: {answer}");
    // The form takes a whole descriptor; one that meets no limit says so.
    page.type_into("#reset-domain", "api").await;
    page.type_into("#reset-entries", "tenant=t, user=alice").await;
    clear_result(&mut page).await;
    page.click("#reset-form button[type=submit]").await;
    let (status, body) = admin_result(&mut page).await;
    let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("JSON answer: {e}: {body}"));
    assert_eq!((status, &answer["limits"], &answer["reset"]), (200, &json!(0), &json!(0)), "{answer}");
    assert!(answer["note"].as_str().is_some_and(|n| n.contains("no limit matches")), "{answer}");

    // b. Reload from the page.
    clear_result(&mut page).await;
    page.click("#reload").await;
    let (status, body) = admin_result(&mut page).await;
    assert_eq!(status, 200, "the reload is done: {body}");
    let answer: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("JSON answer: {e}: {body}"));
    assert_eq!((&answer["result"], &answer["changed"]), (&json!("ok"), &json!(true)), "{answer}");
    let (limit, new_hash) = rules_in_force(&service).await;
    assert_eq!(limit["requests_per_unit"], 5, "the new limit is in force");
    assert_ne!(new_hash, old_hash);
    assert_eq!(answer["config_hash"], new_hash.as_str());
    // The page shows the new configuration.
    page.wait_for(
        "the new hash and limit on the page",
        &format!(
            "document.getElementById('config-hash').textContent === {}
               && document.querySelector('#limits tr[data-key=\"api.user\"] td:nth-child(4)')?.textContent === '5'
               && document.getElementById('config-reload').textContent.startsWith('ok')",
            Value::from(new_hash.as_str())
        ),
    )
    .await;

    // A broken file: the page shows the refusal, the rules in force stay.
    support::write(
        &service.rules,
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight }\n",
    );
    clear_result(&mut page).await;
    page.click("#reload").await;
    let (status, body) = admin_result(&mut page).await;
    assert_eq!(status, 422, "a broken file is refused: {body}");
    assert!(body.contains("fortnight"), "the problem is named: {body}");
    let (limit, hash) = rules_in_force(&service).await;
    assert_eq!((&limit["requests_per_unit"], &hash), (&json!(5), &new_hash), "the rules in force stay");
    page.wait_for(
        "the refused reload on the page",
        "document.getElementById('config-reload').className === 'bad'
           && document.getElementById('config-reload').textContent.startsWith('error')
           && document.getElementById('config-reload').textContent.includes('fortnight')",
    )
    .await;
    // And a banner at the top says the rules before it are in force.
    page.wait_for(
        "the failed reload's banner",
        "document.getElementById('reload-banner').checkVisibility()
           && document.getElementById('reload-banner').textContent.includes('still in force')
           && document.getElementById('reload-banner').textContent.includes('fortnight')",
    )
    .await;
    drop(page);
    service.stop().await;
}

/// An admin action whose request cannot even be sent (the service is
/// gone) must say so in `#admin-result`, not leave the last answer there:
/// an operator would read a reload that never happened as done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_action_that_cannot_reach_the_service_says_so() {
    let service = start_with(RULES, ServiceStore::Memory(MemoryStore::new()), |c| {
        c.admin_token = Some(TOKEN.into());
        c.watch = false;
    })
    .await;
    let mut page = Page::open(&service.url("/")).await;
    page.wait_for("the page drawn from /v1/stats", "document.body.dataset.loaded === 'true'").await;
    page.type_into("#token", TOKEN).await;
    page.click("#token-form button[type=submit]").await;
    clear_result(&mut page).await;
    page.click("#reload").await;
    let (status, body) = admin_result(&mut page).await;
    assert_eq!(status, 200, "{body}");
    let done = page.text("#admin-result").await;

    service.stop().await;
    page.wait_for(
        "the page noticing the service is gone",
        "document.getElementById('updated').textContent.startsWith('cannot reach the service')",
    )
    .await;
    page.click("#reload").await;
    page.wait_for(
        "#admin-result telling that the reload could not be sent (not the last answer)",
        &format!(
            "(t => t !== '' && t !== {done})(document.getElementById('admin-result').textContent)",
            done = Value::from(done.as_str())
        ),
    )
    .await;
    let text = page.text("#admin-result").await;
    assert!(!text.starts_with("200"), "no success shown for a reload that was not sent: {text}");
}

// ---------------------------------------------------------------------------
// A gateway's routes.

/// A gateway service on port 0, with its HTTP API.
struct Gateway {
    http: SocketAddr,
    proxy: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), slidegate_server::ServeError>>,
    _dir: tempfile::TempDir,
}

impl Gateway {
    async fn start(yaml: &str) -> Gateway {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("gateway.yaml");
        std::fs::write(&file, yaml).expect("write the gateway file");
        let mut config = ServerConfig::for_gateway(&file, ServiceStore::Memory(MemoryStore::new()));
        config.grace = Duration::from_secs(5);
        let http = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let proxy = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let (http_addr, proxy_addr) = (http.local_addr().expect("addr"), proxy.local_addr().expect("addr"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve(config, Listeners::new(None, Some(http)).with_gateway(proxy), async {
            let _ = stopped.await;
        }));
        Gateway { http: http_addr, proxy: proxy_addr, stop: Some(stop), task, _dir: dir }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await.expect("serve task").expect("serve");
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The path the upstream echoes in answer to `body` (an answer not its
/// echo: none).
fn echoed_path(body: &str) -> Option<String> {
    let echo: Value = serde_json::from_str(body).ok()?;
    echo["uri"].as_str().map(str::to_owned)
}

/// The sum of a route's series in `/v1/stats`.
fn total(stats: &Value, route: &str, series: &str) -> u64 {
    let routes = stats["gateway"]["routes"].as_array().expect("the gateway's routes");
    let route = routes.iter().find(|r| r["name"] == route).unwrap_or_else(|| panic!("route {route}"));
    route[series].as_array().expect("a series").iter().map(|v| v.as_u64().expect("a count")).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_a_gateways_routes_and_their_traffic() {
    let up = Upstream::start();
    let upstream = up.addr();
    let gateway = Gateway::start(&format!(
        "routes:
  - name: login
    path_prefix: /login
    upstreams: [http://{upstream}]
    limits:
      - {{ key: client_ip, requests_per_unit: 2, unit: hour }}
  - name: site
    path_prefix: /
    upstreams: [http://{upstream}]
"
    ))
    .await;
    let proxy = format!("http://{}", gateway.proxy);
    // Some admitted, some limited.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let (status, _, body) = http("GET", &format!("{proxy}/login"), Vec::new(), &[]).await;
        if status == 200 {
            assert_eq!(echoed_path(&body).as_deref(), Some("/login"), "the upstream answered: {body}");
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [200, 200, 429, 429, 429], "two logins an hour");
    for path in ["/", "/about", "/about/team"] {
        let (status, _, body) = http("GET", &format!("{proxy}{path}"), Vec::new(), &[]).await;
        assert_eq!((status, echoed_path(&body).as_deref()), (200, Some(path)), "{path}: {body}");
    }
    // And traffic keeps flowing on both routes.
    let _traffic = Traffic::start({
        let proxy = proxy.clone();
        move || {
            let proxy = proxy.clone();
            async move {
                http("GET", &format!("{proxy}/login"), Vec::new(), &[]).await;
                http("GET", &format!("{proxy}/"), Vec::new(), &[]).await;
            }
        }
    });

    let stats_url = format!("http://{}/v1/stats", gateway.http);
    let (status, _, text) = http("GET", &stats_url, Vec::new(), &[]).await;
    assert_eq!(status, 200, "{text}");
    let stats: Value = serde_json::from_str(&text).expect("stats JSON");
    assert_eq!(total(&stats, "login", "admitted"), 2, "two logins an hour, whatever the traffic");
    assert!(total(&stats, "login", "limited") >= 3);
    assert!(total(&stats, "site", "admitted") >= 3);
    assert_eq!(total(&stats, "site", "limited"), 0, "the site has no limit");

    let mut page = Page::open(&format!("http://{}/", gateway.http)).await;
    page.wait_for("the page drawn from /v1/stats", "document.body.dataset.loaded === 'true'").await;
    page.wait_for(
        "the gateway section",
        "!document.getElementById('gateway-section').hidden
           && document.getElementById('gateway-section').checkVisibility()",
    )
    .await;
    let routes = page
        .eval("[...document.querySelectorAll('#routes tbody tr')].map(r => [r.dataset.route, r.cells[0].textContent])")
        .await;
    assert_eq!(routes, json!([["login", "login"], ["site", "site"]]), "one row per route, in order");
    let login = page.text("#routes tr[data-route=login] td:nth-child(6)").await;
    assert!(login.contains("(client_ip): 2 / 1 h"), "the login limit: {login}");
    assert_eq!(page.text("#routes tr[data-route=site] td:nth-child(6)").await, "none");
    let upstreams = page.text("#routes tr[data-route=site] td:nth-child(5)").await;
    assert!(upstreams.contains(&upstream.to_string()), "{upstreams}");

    // The charts: admitted and limited logins, admitted pages, no limited pages.
    let moved = |route: &str, series: &str| {
        format!(
            "document.querySelector('#routes tr[data-route={route}] svg.spark polyline.{series}')
               .getAttribute('points').split(' ').some(p => Number(p.split(',')[1]) < 27)"
        )
    };
    page.wait_for(
        "the charts of the traffic",
        &format!(
            "{} && {} && {}",
            moved("login", "admitted"),
            moved("login", "limited"),
            moved("site", "admitted")
        ),
    )
    .await;
    assert_eq!(page.eval(&moved("site", "limited")).await, false, "nothing limited on the site");
    // The last second's counts, with traffic flowing.
    page.wait_for(
        "the last second's counts",
        "Number(document.querySelector('#routes tr[data-route=login] td.limited-now').textContent) > 0
           && Number(document.querySelector('#routes tr[data-route=site] td.admitted-now').textContent) > 0",
    )
    .await;

    // A screenshot a person can open.
    page.eval("document.getElementById('gateway-section').scrollIntoView()").await;
    let png = page.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    assert!(png.len() > 10_000, "a real picture, {} bytes", png.len());
    let dir = target_dir();
    std::fs::create_dir_all(&dir).expect("target dir");
    std::fs::write(dir.join("status-page-gateway.png"), &png).expect("write the screenshot");
    drop(page);
    gateway.stop().await;
}
