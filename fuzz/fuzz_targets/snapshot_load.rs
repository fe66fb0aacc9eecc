#![no_main]
// Arbitrary bytes read as a snapshot, as they are and with their checksums fixed (to reach the
// decoding behind them): a typed error or a valid load, never a panic, and never a peak
// allocation the input's size does not justify (allocation-counter is the global allocator).
use kcache_snapshot::fuzz::{load_postcard, load_raw, postcard_allocation_bound, raw_allocation_bound, with_checksums_fixed};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for input in [data.to_vec(), with_checksums_fixed(data)] {
        let n = input.len();
        let raw = allocation_counter::measure(|| drop(load_raw(&input)));
        assert!(raw.bytes_max <= raw_allocation_bound(n), "raw load of {n} bytes peaked at {}", raw.bytes_max);
        let pc = allocation_counter::measure(|| drop(load_postcard(&input)));
        assert!(pc.bytes_max <= postcard_allocation_bound(n), "postcard load of {n} bytes peaked at {}", pc.bytes_max);
    }
});
