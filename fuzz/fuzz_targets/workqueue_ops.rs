#![no_main]
use kcache_workqueue::fuzz::Op;
libfuzzer_sys::fuzz_target!(|ops: Vec<Op>| kcache_workqueue::fuzz::run(&ops));
