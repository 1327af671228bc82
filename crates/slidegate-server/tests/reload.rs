//! Hot reload through the file watch: a rewrite in place, a replacement by
//! rename and a Kubernetes ConfigMap's symlink swap put new rules in force;
//! a bad file keeps the rules in force and their counters; a limit whose
//! numbers change keeps its counter (on Redis here), one whose window, name
//! or position changes starts afresh.
//!
//! (`SIGHUP` is not sent here: in-process, it would reach the test runner.)

mod support;

use std::path::Path;

use serde_json::{Value, json};
use slidegate::MemoryStore;
use slidegate_server::ServiceStore;
use support::{Service, http, post_json, start, start_at, write};

const RULES: &str = r#"
domain: api
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 5
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 4
"#;

/// `RULES` with the user's limit at `n`.
fn rules_with_user_limit(n: u32) -> String {
    RULES.replace("requests_per_unit: 5", &format!("requests_per_unit: {n}"))
}

async fn status(service: &Service) -> Value {
    let (code, _, text) = http("GET", &service.url("/v1/status"), Vec::new(), &[]).await;
    assert_eq!(code, 200, "{text}");
    serde_json::from_str(&text).expect("status JSON")
}

async fn config_hash(service: &Service) -> String {
    status(service).await["config"]["hash"].as_str().expect("config.hash").to_owned()
}

/// One `/v1/check` of `key=value`: status and the descriptor's answer.
async fn check(service: &Service, key: &str, value: &str) -> (u16, Value) {
    let body = json!({"domain": "api", "descriptors": [{"entries": [{"key": key, "value": value}]}]});
    let (code, _, answer) = post_json(&service.url("/v1/check"), &body.to_string()).await;
    (code, answer["descriptors"][0].clone())
}

/// Waits until a configuration other than `old` is in force and the last
/// reload succeeded; returns its hash.
async fn reloaded_from(service: &Service, old: &str) -> String {
    let mut hash = String::new();
    support::eventually("the new rules in force", async || {
        let status = status(service).await;
        hash = status["config"]["hash"].as_str().unwrap_or_default().to_owned();
        hash != old && status["last_reload"]["result"] == "ok"
    })
    .await;
    hash
}

/// The `user` limit `/v1/rules` shows.
async fn user_limit_in_rules(service: &Service) -> Value {
    let (code, _, text) = http("GET", &service.url("/v1/rules"), Vec::new(), &[]).await;
    assert_eq!(code, 200, "{text}");
    let rules: Value = serde_json::from_str(&text).expect("rules JSON");
    let descriptors = rules["domains"][0]["descriptors"].as_array().expect("descriptors").clone();
    descriptors.into_iter().find(|d| d["key"] == "user").expect("the user descriptor")["limits"][0].clone()
}

/// The value of the sample of `name` whose labels include `labels` (0 if absent).
async fn metric(service: &Service, name: &str, labels: &[(&str, &str)]) -> f64 {
    let (code, _, text) = http("GET", &service.url("/metrics"), Vec::new(), &[]).await;
    assert_eq!(code, 200);
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            let matches =
                metric == name && labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            matches.then(|| value.parse().ok())?
        })
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_in_place_is_picked_up() {
    let service = start(RULES).await;
    // Answered: the watch is set up.
    let old = config_hash(&service).await;
    let (_, d) = check(&service, "user", "a").await;
    assert_eq!(d["limit"]["requests_per_unit"], 5);

    write(&service.rules, &rules_with_user_limit(7));
    let new = reloaded_from(&service, &old).await;
    assert_eq!(status(&service).await["last_reload"]["config_hash"], new);
    assert_eq!(user_limit_in_rules(&service).await["requests_per_unit"], 7);
    let (code, d) = check(&service, "user", "a").await;
    assert_eq!(code, 200);
    assert_eq!(d["limit"]["requests_per_unit"], 7);
    assert_eq!(d["remaining"], 5, "a limit whose number changed keeps its count");

    // And again: every change is picked up, not only the first.
    write(&service.rules, &rules_with_user_limit(9));
    reloaded_from(&service, &new).await;
    let (_, d) = check(&service, "user", "a").await;
    assert_eq!(d["limit"]["requests_per_unit"], 9);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_by_rename_is_picked_up() {
    let service = start(RULES).await;
    let old = config_hash(&service).await;
    let temp = service.dir.path().join(".rules.yaml.tmp");
    write(&temp, &rules_with_user_limit(11));
    std::fs::rename(&temp, &service.rules).expect("rename over the rules");
    let new = reloaded_from(&service, &old).await;
    assert_eq!(user_limit_in_rules(&service).await["requests_per_unit"], 11);
    let (_, d) = check(&service, "user", "r").await;
    assert_eq!(d["limit"]["requests_per_unit"], 11);

    // A second replacement (the watch survives the first file's removal).
    write(&temp, &rules_with_user_limit(12));
    std::fs::rename(&temp, &service.rules).expect("rename over the rules");
    reloaded_from(&service, &new).await;
    let (_, d) = check(&service, "user", "r").await;
    assert_eq!(d["limit"]["requests_per_unit"], 12);
    service.stop().await;
}

/// A ConfigMap volume as the kubelet writes it: `..data` links to a
/// versioned directory, the files are links through `..data`, and an update
/// writes a new version, links `..data_tmp` to it and renames that over
/// `..data`.
fn configmap_version(dir: &Path, version: &str, rules: &str) {
    let versioned = dir.join(version);
    std::fs::create_dir(&versioned).expect("versioned dir");
    write(&versioned.join("rules.yaml"), rules);
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_symlink_swap_is_picked_up() {
    use std::os::unix::fs::symlink;

    let dir = tempfile::tempdir().expect("temp dir");
    let volume = dir.path().join("config");
    std::fs::create_dir(&volume).expect("volume");
    configmap_version(&volume, "..2026_01_01_00_00_00.000000001", RULES);
    symlink("..2026_01_01_00_00_00.000000001", volume.join("..data")).expect("..data");
    symlink("..data/rules.yaml", volume.join("rules.yaml")).expect("rules.yaml");

    let service = start_at(dir, volume.clone(), ServiceStore::Memory(MemoryStore::new()), |_| {}).await;
    let first = status(&service).await;
    assert_eq!(first["config"]["files"], json!([volume.join("rules.yaml")]));
    let old = first["config"]["hash"].as_str().unwrap().to_owned();
    let (_, d) = check(&service, "user", "k").await;
    assert_eq!((&d["limit"]["requests_per_unit"], &d["remaining"]), (&json!(5), &json!(4)));
    let (_, d) = check(&service, "tenant", "k").await;
    assert_eq!(d["remaining"], 3);

    // The kubelet's update.
    configmap_version(&volume, "..2026_01_02_00_00_00.000000002", &rules_with_user_limit(13));
    symlink("..2026_01_02_00_00_00.000000002", volume.join("..data_tmp")).expect("..data_tmp");
    std::fs::rename(volume.join("..data_tmp"), volume.join("..data")).expect("swap ..data");
    std::fs::remove_dir_all(volume.join("..2026_01_01_00_00_00.000000001")).expect("old version");

    let new = reloaded_from(&service, &old).await;
    assert_eq!(user_limit_in_rules(&service).await["requests_per_unit"], 13);
    let (_, d) = check(&service, "user", "k").await;
    assert_eq!((&d["limit"]["requests_per_unit"], &d["remaining"]), (&json!(13), &json!(11)));
    let (_, d) = check(&service, "tenant", "k").await;
    assert_eq!(d["remaining"], 2, "the unchanged tenant limit kept its counter");

    // A second update through the same dance, which adds a key to the
    // ConfigMap (a new file, linked through `..data` after the swap).
    configmap_version(&volume, "..2026_01_03_00_00_00.000000003", &rules_with_user_limit(14));
    write(
        &volume.join("..2026_01_03_00_00_00.000000003").join("extra.yaml"),
        "domain: extra\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n      requests_per_unit: 2\n",
    );
    symlink("..2026_01_03_00_00_00.000000003", volume.join("..data_tmp")).expect("..data_tmp");
    std::fs::rename(volume.join("..data_tmp"), volume.join("..data")).expect("swap ..data");
    symlink("..data/extra.yaml", volume.join("extra.yaml")).expect("extra.yaml");
    std::fs::remove_dir_all(volume.join("..2026_01_02_00_00_00.000000002")).expect("old version");
    support::eventually("both files in force", async || {
        let status = status(&service).await;
        status["config"]["domains"] == json!(["api", "extra"]) && status["last_reload"]["result"] == "ok"
    })
    .await;
    assert_ne!(config_hash(&service).await, new);
    let (_, d) = check(&service, "user", "k").await;
    assert_eq!(d["limit"]["requests_per_unit"], 14);
    let body = json!({"domain": "extra", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]});
    let (_, _, answer) = post_json(&service.url("/v1/check"), &body.to_string()).await;
    assert_eq!(answer["descriptors"][0]["remaining"], 1);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_rewrite_keeps_the_rules_and_their_counters_until_a_good_one() {
    let service = start(RULES).await;
    let old = config_hash(&service).await;
    let errors_before = metric(&service, "slidegate_config_reloads_total", &[("result", "error")]).await;
    for left in [4, 3] {
        let (_, d) = check(&service, "user", "bad").await;
        assert_eq!(d["remaining"], left);
    }

    // A YAML syntax error.
    write(&service.rules, "domain: api\ndescriptors:\n  - key: user\n    rate_limit: [unclosed\n");
    let mut seen = Value::Null;
    support::eventually("the reload refused", async || {
        seen = status(&service).await;
        seen["last_reload"]["result"] == "error"
    })
    .await;
    let errors = seen["last_reload"]["errors"].as_array().expect("errors").clone();
    assert!(!errors.is_empty(), "{seen}");
    let path = service.rules.display().to_string();
    assert!(
        errors.iter().all(|e| e.as_str().unwrap().starts_with(&path)),
        "errors name the file: {errors:?}"
    );
    assert_eq!(seen["config"]["hash"], old, "the rules in force stay");
    assert_eq!(seen["last_reload"]["config_hash"], old);
    assert_eq!(seen["ready"], true);
    let (code, d) = check(&service, "user", "bad").await;
    assert_eq!(code, 200);
    assert_eq!(
        (&d["limit"]["requests_per_unit"], &d["remaining"]),
        (&json!(5), &json!(2)),
        "the counter continues"
    );
    assert!(
        metric(&service, "slidegate_config_reloads_total", &[("result", "error")]).await > errors_before,
        "the refused reload is counted"
    );

    // An unknown key: refused too, its error naming the key where it is.
    write(
        &service.rules,
        "domain: api\ndescriptors:\n  - key: user\n    ratelimit:\n      unit: minute\n      requests_per_unit: 50\n",
    );
    let mut seen = Value::Null;
    support::eventually("the unknown key refused", async || {
        seen = status(&service).await;
        seen["last_reload"]["result"] == "error"
            && seen["last_reload"]["errors"].as_array().is_some_and(|e| {
                e.iter().any(|e| e.as_str().is_some_and(|e| e.contains("ratelimit") && e.contains(":4:5:")))
            })
    })
    .await;
    assert_eq!(seen["config"]["hash"], old);
    let (_, d) = check(&service, "user", "bad").await;
    assert_eq!((&d["limit"]["requests_per_unit"], &d["remaining"]), (&json!(5), &json!(1)));

    // A file that is no rules file at all (not UTF-8).
    std::fs::write(&service.rules, b"domain: \xff\xfe\n").expect("write");
    support::eventually("the bytes refused", async || {
        let status = status(&service).await;
        status["last_reload"]["errors"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e.as_str().is_some_and(|e| e.contains("UTF-8"))))
    })
    .await;
    assert_eq!(config_hash(&service).await, old);

    // A good rewrite is picked up; the unchanged user limit keeps counting.
    let good =
        format!("{RULES}  - key: region\n    rate_limit:\n      unit: day\n      requests_per_unit: 2\n");
    write(&service.rules, &good);
    reloaded_from(&service, &old).await;
    let status_now = status(&service).await;
    assert_eq!(status_now["last_reload"]["errors"], json!([]));
    let (code, d) = check(&service, "user", "bad").await;
    assert_eq!((code, &d["remaining"]), (200, &json!(0)), "{d}");
    let (code, d) = check(&service, "user", "bad").await;
    assert_eq!((code, &d["allowed"]), (429, &json!(false)));
    let (_, d) = check(&service, "region", "eu").await;
    assert_eq!(
        (&d["limit"]["unit"], &d["remaining"]),
        (&json!("day"), &json!(1)),
        "the new descriptor applies"
    );
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_numbers_keep_their_counters_on_redis_and_other_changes_start_afresh() {
    let rules = r#"
domain: api
descriptors:
  - key: user
    rate_limit:
      name: per_user
      unit: minute
      requests_per_unit: 5
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 4
  - key: team
    rate_limit:
      name: per_team
      unit: hour
      requests_per_unit: 6
  - key: org
    rate_limit:
      unit: hour
      requests_per_unit: 6
"#;
    let redis = slidegate_testkit::RedisServer::start().expect("redis-server");
    let store = slidegate_redis::RedisStore::connect(&redis.url()).await.expect("connect");
    let service = support::start_with(rules, ServiceStore::Redis(store), |_| {}).await;
    let old = config_hash(&service).await;
    for key in ["user", "tenant", "team", "org"] {
        for _ in 0..2 {
            let (code, _) = check(&service, key, "c").await;
            assert_eq!(code, 200);
        }
    }
    // The user limit is unchanged (the file around it is not); the tenant's
    // requests_per_unit changes; the team's name changes; the org's window.
    let changed = rules
        .replace("domain: api\n", "# reloaded\ndomain: api\n")
        .replace("requests_per_unit: 4", "requests_per_unit: 8")
        .replace("name: per_team", "name: per_squad")
        .replace(
            "    rate_limit:\n      unit: hour\n      requests_per_unit: 6\n",
            "    rate_limit:\n      unit: day\n      requests_per_unit: 6\n",
        );
    assert!(changed.contains("unit: day") && changed.contains("per_squad") && changed.contains(": 8"));
    write(&service.rules, &changed);
    reloaded_from(&service, &old).await;

    let (_, d) = check(&service, "user", "c").await;
    assert_eq!((&d["limit"]["requests_per_unit"], &d["remaining"]), (&json!(5), &json!(2)), "continues: {d}");
    let (_, d) = check(&service, "tenant", "c").await;
    assert_eq!((&d["limit"]["requests_per_unit"], &d["remaining"]), (&json!(8), &json!(5)), "kept: {d}");
    let (_, d) = check(&service, "team", "c").await;
    assert_eq!((&d["limit"]["name"], &d["remaining"]), (&json!("per_squad"), &json!(5)), "afresh: {d}");
    let (_, d) = check(&service, "org", "c").await;
    assert_eq!((&d["limit"]["unit"], &d["remaining"]), (&json!("day"), &json!(5)), "afresh: {d}");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_then_recreated_file_is_picked_up() {
    let service = start(RULES).await;
    let old = config_hash(&service).await;
    let (_, d) = check(&service, "user", "gone").await;
    assert_eq!(d["remaining"], 4);
    // An editor's save: the file goes away for a moment.
    std::fs::remove_file(&service.rules).expect("remove the rules");
    let mut seen = Value::Null;
    support::eventually("the missing file refused", async || {
        seen = status(&service).await;
        seen["last_reload"]["result"] == "error"
    })
    .await;
    let errors = seen["last_reload"]["errors"].to_string();
    assert!(errors.contains("cannot read"), "{errors}");
    assert_eq!(seen["config"]["hash"], old);
    let (code, d) = check(&service, "user", "gone").await;
    assert_eq!((code, &d["remaining"]), (200, &json!(3)), "the rules in force stay, and their counters");

    write(&service.rules, &rules_with_user_limit(15));
    reloaded_from(&service, &old).await;
    let (_, d) = check(&service, "user", "gone").await;
    assert_eq!((&d["limit"]["requests_per_unit"], &d["remaining"]), (&json!(15), &json!(12)));
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_directory_picks_up_new_changed_and_removed_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(rules.join("teams")).expect("rules dir");
    write(&rules.join("api.yaml"), RULES);
    let service = start_at(dir, rules.clone(), ServiceStore::Memory(MemoryStore::new()), |_| {}).await;
    let first = status(&service).await;
    assert_eq!(first["config"]["domains"], json!(["api"]));
    let old = first["config"]["hash"].as_str().unwrap().to_owned();
    let (_, d) = check(&service, "user", "dir").await;
    assert_eq!(d["remaining"], 4);

    // A new file in a subdirectory.
    let team = rules.join("teams").join("team.yml");
    write(
        &team,
        "domain: team\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 3\n",
    );
    let new = reloaded_from(&service, &old).await;
    let now = status(&service).await;
    assert_eq!(now["config"]["domains"], json!(["api", "team"]));
    assert_eq!(now["config"]["files"], json!([rules.join("api.yaml"), team]));
    let body = json!({"domain": "team", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]});
    let (_, _, answer) = post_json(&service.url("/v1/check"), &body.to_string()).await;
    assert_eq!(answer["descriptors"][0]["remaining"], 2);
    let (_, d) = check(&service, "user", "dir").await;
    assert_eq!(d["remaining"], 3, "the other file's limits kept their counters");

    // A second file defining the same domain: refused, naming both files.
    let clash = rules.join("clash.yaml");
    write(&clash, "domain: api\ndescriptors: []\n");
    let mut seen = Value::Null;
    support::eventually("the clash refused", async || {
        seen = status(&service).await;
        seen["last_reload"]["result"] == "error"
    })
    .await;
    let errors = seen["last_reload"]["errors"].to_string();
    assert!(errors.contains("already defined"), "{errors}");
    assert_eq!(seen["config"]["hash"], new);

    // Its removal, and the removal of the team file: back to one domain.
    std::fs::remove_file(&clash).expect("remove");
    std::fs::remove_file(&team).expect("remove");
    support::eventually("one domain again", async || {
        let status = status(&service).await;
        status["config"]["domains"] == json!(["api"]) && status["last_reload"]["result"] == "ok"
    })
    .await;
    let (_, _, answer) = post_json(&service.url("/v1/check"), &body.to_string()).await;
    assert_eq!(answer["descriptors"][0]["limit"], Value::Null, "the team domain is gone");
    let (_, d) = check(&service, "user", "dir").await;
    assert_eq!(d["remaining"], 2);
    service.stop().await;
}
