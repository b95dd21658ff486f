//! Compiles the BPF scheduler (bpf/allot_stride.bpf.c) with clang into OUT_DIR, where
//! src/bpf.rs embeds it. clang: $CLANG, else clang-16, else clang. libbpf's BPF headers
//! (bpf_helpers.h, bpf_core_read.h) come from libbpf-sys, which vendors libbpf.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let include = std::env::var("DEP_BPF_INCLUDE").expect("libbpf-sys gives its headers' folder (DEP_BPF_INCLUDE)");
    println!("cargo:rerun-if-changed=bpf/allot_stride.bpf.c");
    println!("cargo:rerun-if-changed=bpf/sched_ext.h");
    println!("cargo:rerun-if-changed=bpf/wake.h");
    println!("cargo:rerun-if-changed=bpf/quantum.h");
    println!("cargo:rerun-if-changed=bpf/lottery.h");
    println!("cargo:rerun-if-changed=bpf/cap.h");
    println!("cargo:rerun-if-env-changed=CLANG");
    let candidates: Vec<String> = match std::env::var("CLANG") {
        Ok(c) => vec![c],
        Err(_) => vec!["clang-16".into(), "clang".into()],
    };
    let clang = candidates.iter().find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success())).unwrap_or_else(|| {
        panic!("allot-scx needs clang to compile its BPF scheduler: none of {candidates:?} runs (apt-get install clang-16, or set CLANG)")
    });
    let obj = out.join("allot_stride.bpf.o");
    let status = Command::new(clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror", "-D__TARGET_ARCH_x86", "-mcpu=v3"])
        .arg(format!("-I{include}"))
        .args(["-c", "bpf/allot_stride.bpf.c", "-o"])
        .arg(&obj)
        .status()
        .unwrap_or_else(|e| panic!("running {clang}: {e}"));
    assert!(status.success(), "{clang} could not compile bpf/allot_stride.bpf.c (its errors are above)");
}
