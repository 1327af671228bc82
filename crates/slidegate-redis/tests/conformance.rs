//! The shared conformance suite against a real redis-server, client-clock mode.

mod support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_conforms() {
    let server = support::server();
    slidegate_testkit::conformance::run_all(|clock| {
        let server = &server;
        async move { support::client_clock_store(server, "conformance", clock).await }
    })
    .await;
    support::assert_every_key_has_ttl(&server).await;
}
