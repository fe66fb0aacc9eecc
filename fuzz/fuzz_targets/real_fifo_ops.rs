#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| kcache_deltafifo::fuzz_real::run_bytes(data));
