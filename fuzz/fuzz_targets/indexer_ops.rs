#![no_main]
libfuzzer_sys::fuzz_target!(|ops: Vec<kcache_indexer::fuzz::Op>| kcache_indexer::fuzz::run(&ops));
