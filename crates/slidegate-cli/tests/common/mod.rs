//! Runs the `slidegate` binary the way a user would.

#![allow(dead_code, unreachable_pub)] // each test file uses its own subset

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// What `child` writes to its piped standard error, collected line by line
/// by a thread of its own while it runs (read it any time; it ends with
/// the child).
pub fn collect_stderr(child: &mut Child) -> Arc<Mutex<String>> {
    let stderr = Arc::new(Mutex::new(String::new()));
    let pipe = child.stderr.take().expect("stderr is piped");
    let collected = Arc::clone(&stderr);
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            let mut all = collected.lock().unwrap_or_else(PoisonError::into_inner);
            all.push_str(&line);
            all.push('\n');
        }
    });
    stderr
}

/// Starts `slidegate args…` with every standard stream piped.
fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_slidegate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn slidegate")
}

/// Runs `slidegate args…` with `stdin` as standard input.
pub fn slidegate(args: &[&str], stdin: impl AsRef<[u8]>) -> Output {
    let mut child = spawn(args);
    // Fed from a thread while the output is read: a large input and a
    // large output would otherwise block each other in full pipes.
    let mut input = child.stdin.take().expect("stdin is piped");
    let stdin = stdin.as_ref().to_vec();
    let feeder = std::thread::spawn(move || {
        // A run that fails early stops reading: its error is what counts.
        if let Err(e) = input.write_all(&stdin) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
        }
    });
    let output = child.wait_with_output().expect("wait for slidegate");
    feeder.join().expect("stdin feeder");
    output
}

/// Standard output of a run that must succeed.
pub fn success(args: &[&str], stdin: impl AsRef<[u8]>) -> String {
    let output = slidegate(args, stdin);
    assert!(
        output.status.success(),
        "slidegate {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// Standard error of a run that must fail.
pub fn failure(args: &[&str], stdin: impl AsRef<[u8]>) -> String {
    let output = slidegate(args, stdin);
    assert!(!output.status.success(), "slidegate {args:?} should fail");
    String::from_utf8(output.stderr).expect("utf-8 error")
}

/// Standard output of `slidegate args…`, which must succeed, given
/// `first` on standard input, then after `pause`, `rest`: input that comes
/// slowly, as from a live source.
pub fn paced(args: &[&str], first: &str, pause: Duration, rest: &str) -> String {
    let mut child = spawn(args);
    let mut input = child.stdin.take().expect("stdin is piped");
    input.write_all(first.as_bytes()).expect("write stdin");
    input.flush().expect("flush stdin");
    std::thread::sleep(pause);
    input.write_all(rest.as_bytes()).expect("write stdin");
    drop(input);
    let output = child.wait_with_output().expect("wait for slidegate");
    assert!(output.status.success(), "slidegate {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8 output")
}
