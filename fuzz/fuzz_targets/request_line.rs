//! Any bytes as one client request line, as the daemon reads them from any local user:
//! decoded or refused, never a panic; a decoded request encodes to one line that decodes
//! to itself.
#![no_main]
use allot::proto::{decode_request, encode_request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = decode_request(data) {
        let line = encode_request(&r);
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1, "one line");
        let again = decode_request(&line).expect("an encoded request decodes");
        assert_eq!(format!("{again:?}"), format!("{r:?}"));
    }
});
