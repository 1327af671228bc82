//! `slidegate replay`: exact answers on the memory store, clear errors for
//! bad input, and the same answers from a real Redis.

mod common;

use common::{failure, paced, success};

const TRACE: &str = r#"{"at_ms": 0, "key": "a"}
{"at_ms": 100, "key": "a"}

{"at_ms": 200, "key": "a", "cost": 1}
{"at_ms": 300, "key": "a"}
{"at_ms": 300, "key": "b"}
{"at_ms": 1000, "key": "a"}
{"at_ms": 1050, "key": "a", "cost": 2}
{"at_ms": 1200, "key": "a", "cost": 2}
"#;

fn line(at_ms: u64, key: &str, allowed: bool, remaining: u32, retry_after_ms: u64) -> String {
    format!(
        r#"{{"at_ms":{at_ms},"key":"{key}","allowed":{allowed},"remaining":{remaining},"retry_after_ms":{retry_after_ms}}}"#
    )
}

fn rule_args(algorithm: &str) -> Vec<&str> {
    vec!["replay", "--algorithm", algorithm, "--limit", "3", "--window", "1s"]
}

#[test]
fn sliding_log_answers_exactly() {
    let out = success(&rule_args("log"), TRACE);
    let expected = [
        line(0, "a", true, 2, 0),
        line(100, "a", true, 1, 0),
        line(200, "a", true, 0, 0),
        // The charge at 0 leaves the window at 1000.
        line(300, "a", false, 0, 700),
        line(300, "b", true, 2, 0),
        // (t - W, t] is half open: the charge at 0 no longer counts at 1000.
        line(1000, "a", true, 0, 0),
        // Cost 2 needs the charges at 100 and 200 gone: at 1200.
        line(1050, "a", false, 0, 150),
        line(1200, "a", true, 0, 0),
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn fixed_window_answers_exactly() {
    let out = success(&rule_args("fixed"), TRACE);
    let expected = [
        line(0, "a", true, 2, 0),
        line(100, "a", true, 1, 0),
        line(200, "a", true, 0, 0),
        line(300, "a", false, 0, 700),
        line(300, "b", true, 2, 0),
        line(1000, "a", true, 2, 0),
        line(1050, "a", true, 0, 0),
        line(1200, "a", false, 0, 800),
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn reads_input_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.jsonl");
    std::fs::write(&path, TRACE).unwrap();
    let mut args = rule_args("log");
    args.extend(["--input", path.to_str().unwrap()]);
    assert_eq!(success(&args, ""), success(&rule_args("log"), TRACE));
}

#[test]
fn malformed_lines_are_named_by_number() {
    let cases = [
        (
            "{\"at_ms\": 0, \"key\": \"a\"}\n{\"at_ms\": 1, \"key\": \"a\"}\nnot json\n",
            "line 3: invalid JSON: expected",
        ),
        ("{\"at_ms\": 0, \"key\": \"a\"}\n\n{\"key\": \"a\"}\n", "line 3: missing field `at_ms`"),
        ("{\"at_ms\": -5, \"key\": \"a\"}\n", "line 1: invalid value: integer `-5`"),
        ("{\"at_ms\": 0, \"key\": \"a\", \"cost\": 0}\n", "line 1: cost must be at least 1"),
        (
            "{\"at_ms\": 0, \"key\": \"a\"}\n{\"at_ms\": 0, \"key\": \"a\", \"cost\": 4}\n",
            "line 2: cost 4 exceeds the limit 3",
        ),
        ("{\"at_ms\": 0, \"key\": \"\"}\n", "line 1: key must not be empty"),
        ("{\"at_ms\": 9, \"key\": \"a\"}\n{\"at_ms\": 8, \"key\": \"a\"}\n", "line 2: at_ms 8 is earlier"),
    ];
    for (input, needle) in cases {
        let err = failure(&rule_args("log"), input);
        assert!(err.contains(needle), "{input:?}: {err:?} should contain {needle:?}");
    }
}

/// A megabyte-sized key is decided (under its digest); a line beyond the
/// bound or not UTF-8 is an error naming it, never a panic or a memory
/// blow-up.
#[test]
fn huge_and_binary_lines_are_bounded() {
    let huge_key = "k".repeat(1 << 20);
    let trace =
        format!("{{\"at_ms\": 0, \"key\": \"{huge_key}\"}}\n{{\"at_ms\": 1, \"key\": \"{huge_key}\"}}\n");
    let out = success(&rule_args("log"), &trace);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].contains("\"allowed\":true,\"remaining\":2"), "admitted");
    assert!(lines[1].contains("\"allowed\":true,\"remaining\":1"), "the same key, the same state");

    let endless = format!("{{\"at_ms\": 0, \"key\": \"a\"}}\n{}", "x".repeat(5 << 20));
    let err = failure(&rule_args("log"), &endless);
    assert!(err.contains("line 2: longer than 4 MiB"), "{err}");

    let mut binary = b"{\"at_ms\": 0, \"key\": \"a\"}\n{\"at_ms\": 1, \"key\": \"".to_vec();
    binary.extend_from_slice(&[0xff, 0xfe, b'"', b'}', b'\n']);
    let err = failure(&rule_args("log"), &binary);
    assert!(err.contains("line 2: not UTF-8"), "{err}");
}

#[test]
fn invalid_rules_and_stores_are_explained() {
    let err = failure(&["replay", "--limit", "0", "--window", "1s"], "");
    assert!(err.contains("limit must be at least 1"), "{err}");
    let err = failure(&["replay", "--limit", "3", "--window", "1500us"], "");
    assert!(err.contains("whole number of milliseconds"), "{err}");
    let err = failure(&["replay", "--limit", "3", "--window", "1s", "--store", "mysql://x"], "");
    assert!(err.contains("redis://"), "{err}");
    let err =
        failure(&["replay", "--limit", "3", "--window", "1s", "--algorithm", "log", "--buckets", "5"], "");
    assert!(err.contains("--buckets only applies"), "{err}");
}

/// A deterministic trace with several keys (one hostile), costs 1–3 and
/// several requests in the same millisecond.
fn mixed_trace() -> String {
    let keys = ["alice", "bob", "{slot}", "carol"];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut at = 1_700_000_000_000u64;
    let mut out = String::new();
    for _ in 0..300 {
        at += next() % 40;
        let key = keys[(next() % 4) as usize];
        let cost = 1 + next() % 3;
        out.push_str(&format!("{{\"at_ms\": {at}, \"key\": \"{key}\", \"cost\": {cost}}}\n"));
    }
    out
}

#[test]
fn redis_gives_the_same_answers_as_memory() {
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let url = server.url();
    let trace = mixed_trace();
    for algorithm in ["log", "counter", "fixed", "gcra"] {
        let mut args = vec!["replay", "--algorithm", algorithm, "--limit", "5", "--window", "500ms"];
        let memory = success(&args, &trace);
        args.extend(["--store", url.as_str()]);
        let redis = success(&args, &trace);
        assert_eq!(memory.lines().count(), 300);
        for (number, (m, r)) in memory.lines().zip(redis.lines()).enumerate() {
            assert_eq!(m, r, "{algorithm}: output line {} differs", number + 1);
        }
        assert_eq!(memory, redis, "{algorithm}");
        assert!(memory.contains("\"allowed\":false"), "{algorithm}: the trace exercises denials");
    }
}

/// The trace's time decides everything, also when state may disappear: a
/// replay on Redis answers as on memory however slowly its input comes — a
/// pause of 1.5 s on standard input between two requests 1 ms apart under
/// a 10 ms window (longer than the keys' old TTL slack of 1 s).
#[test]
fn redis_answers_like_memory_at_any_pace() {
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let url = server.url();
    let (first, rest) = ("{\"at_ms\":1000,\"key\":\"victim\"}\n", "{\"at_ms\":1001,\"key\":\"victim\"}\n");
    let runs: Vec<_> = ["log", "counter", "fixed", "gcra"]
        .into_iter()
        .map(|algorithm| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut args = vec!["replay", "--algorithm", algorithm, "--limit", "1", "--window", "10ms"];
                let memory = success(&args, format!("{first}{rest}"));
                args.extend(["--store", url.as_str()]);
                let redis = paced(&args, first, std::time::Duration::from_millis(1500), rest);
                (algorithm, memory, redis)
            })
        })
        .collect();
    for run in runs {
        let (algorithm, memory, redis) = run.join().expect("run");
        assert!(
            memory.lines().nth(1).is_some_and(|l| l.contains("\"allowed\":false")),
            "{algorithm}: {memory}"
        );
        assert_eq!(memory, redis, "{algorithm}");
    }
}

/// The same without a pause: 100,000 requests for other keys between the
/// two, which take the server's clock past the old slack.
#[test]
fn redis_answers_like_memory_after_a_long_trace() {
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let url = server.url();
    let mut trace = String::from("{\"at_ms\":1000,\"key\":\"victim\"}\n");
    for i in 0..100_000 {
        trace.push_str(&format!("{{\"at_ms\":1000,\"key\":\"other-{i}\"}}\n"));
    }
    trace.push_str("{\"at_ms\":1001,\"key\":\"victim\"}\n");
    let mut args = vec!["replay", "--limit", "1", "--window", "10ms"];
    let memory = success(&args, &trace);
    args.extend(["--store", url.as_str()]);
    let redis = success(&args, &trace);
    assert!(memory.lines().last().is_some_and(|l| l.contains("\"allowed\":false")), "denied on memory");
    assert!(memory == redis, "Redis answered otherwise: {:?}", redis.lines().last());
}

/// At the last time every store decides exactly (2^43 - 1 ms, in the year
/// 2248) Redis answers as memory does; beyond it both refuse the line with
/// the same error.
#[test]
fn both_stores_agree_at_the_edges_of_time() {
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    let url = server.url();
    let last: u64 = (1 << 43) - 1;
    for algorithm in ["log", "counter", "fixed", "gcra"] {
        let mut args = vec!["replay", "--algorithm", algorithm, "--limit", "3", "--window", "7ms"];
        if algorithm == "counter" {
            args.extend(["--buckets", "7"]);
        }
        let edge: String = [last - 9, last - 5, last - 5, last - 4, last - 1, last, last]
            .iter()
            .map(|at| format!("{{\"at_ms\":{at},\"key\":\"k\",\"cost\":2}}\n"))
            .collect();
        let memory = success(&args, &edge);
        let mut on_redis = args.clone();
        on_redis.extend(["--store", url.as_str()]);
        assert_eq!(memory, success(&on_redis, &edge), "{algorithm} at the edge");
        for beyond in [last + 1, 1 << 52, (1 << 53) - 1] {
            let line = format!("{{\"at_ms\":{beyond},\"key\":\"k\"}}\n");
            let on_memory = failure(&args, &line);
            assert!(on_memory.contains("at most 8796093022207"), "{algorithm}: {on_memory}");
            assert_eq!(on_memory, failure(&on_redis, &line), "{algorithm}: the same refusal");
        }
    }
}

/// An error names each of its causes once (the message embedded its
/// source and also chained it, so a refused connection was printed three
/// times).
#[test]
fn errors_name_each_cause_once() {
    let port = slidegate_testkit::free_port().expect("a free port");
    let closed = format!("redis://127.0.0.1:{port}/");
    let err = failure(&["replay", "--limit", "3", "--window", "1s", "--store", &closed], "");
    assert_eq!(err.matches("Connection refused").count(), 1, "{err}");

    // A script refused by the server (out of memory): its message once.
    let server = slidegate_testkit::RedisServer::start().expect("start redis-server");
    server.command("CONFIG SET maxmemory 1").expect("maxmemory");
    let url = server.url();
    let err = failure(
        &["replay", "--limit", "3", "--window", "1s", "--store", &url],
        "{\"at_ms\":1,\"key\":\"a\"}\n",
    );
    assert_eq!(err.matches("OOM").count(), 1, "{err}");
}
