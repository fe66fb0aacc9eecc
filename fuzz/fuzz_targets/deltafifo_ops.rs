#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| kcache_deltafifo::fuzz::run_bytes(data));
