//! Arbitrary bytes as one connection's input to a broker: it must not panic, must not hang, and
//! must close the connection on what it cannot decode.
//!
//! Known finding until `kafka-protocol` bounds its pre-allocations (upstream pull requests
//! #152/#161/#200): an array length forged right after a valid header makes the decoder call
//! `Vec::with_capacity` with billions of elements, and the allocation failure aborts the
//! process (libFuzzer reports out-of-memory). Run with `-rss_limit_mb=4096` to see past it.

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().expect("a runtime");
    runtime.block_on(async {
        let cluster = kafkasim::Cluster::builder().initial_rebalance_delay(Duration::ZERO).build();
        let _ = cluster.create_topic("t", 2);
        let _ = cluster.feed_bytes(0, data, Duration::from_secs(3600)).await;
    });
});
