#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lagless_fuzz::session_control(data));
