//! The JSON snapshot reader (the input as UTF-8 text). Oracle: no panic;
//! `json_to_binary` and `restore_json` accept the same texts; an accepted
//! text converts to a binary snapshot that satisfies every property of
//! `repute_fuzz::accepted`, equals the result of a restore and of holding
//! to no caps, and whose JSON view converts back to the same bytes; a
//! refused one leaves a restoring pool as it was.

#![no_main]

use libfuzzer_sys::fuzz_target;
use repute_core::snapshot::{binary_to_json, capped, json_to_binary, CappedInput, Caps};
use repute_core::{Policy, Pool};
use repute_fuzz::{accepted, held_to_caps, refused, state, NOW};

fuzz_target!(|text: &str| {
    let mut fresh = Pool::new(Policy::default(), 7).expect("default policy");
    let restored = fresh.restore_json(text, NOW);
    held_to_caps(CappedInput::Json(text));
    let Ok(bytes) = json_to_binary(text) else {
        assert!(restored.is_err(), "restore_json accepted what json_to_binary refused");
        refused(|p| p.restore_json(text, NOW));
        return;
    };
    restored.expect("restore_json refused what json_to_binary accepted");
    let pool = Pool::from_snapshot(&bytes, NOW).expect("json_to_binary's output decodes");
    let mut decoded = Pool::from_snapshot(&bytes, NOW).expect("json_to_binary's output decodes");
    assert_eq!(state(&mut fresh), state(&mut decoded), "restore_json differs from json_to_binary");
    let view = binary_to_json(&bytes).expect("a valid snapshot has a JSON view");
    assert_eq!(json_to_binary(&view).expect("a JSON view converts back"), bytes, "JSON view is lossy");
    let uncapped = capped(CappedInput::Json(text), &Caps::default()).expect("no caps refuse nothing valid");
    assert_eq!(uncapped, bytes, "holding to no caps changed the snapshot");
    accepted(&bytes, pool);
});
