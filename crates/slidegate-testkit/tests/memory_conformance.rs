//! The conformance suite against the embedded memory store.

use slidegate::MemoryStore;

#[tokio::test]
async fn memory_store_conforms() {
    slidegate_testkit::conformance::run_all(
        |clock| async move { MemoryStore::builder().clock(clock).build() },
    )
    .await;
}
