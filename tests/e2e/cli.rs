//! The command line as a user meets it: each command's own surface (its
//! errors naming flags and config fields, its runtime hints) through the real binary.

use crate::support::*;

/// A bad field deep inside a `--config` file is named by its path, as the
/// deserializer found it, on one line with the fix; exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_config_errors_name_the_nested_field() {
    let d = tmp();
    let cfg = d.path().join("c.json");
    for (json, path) in [
        (
            r#"{"resources": [{"resource": "v.e/a"}, {"resource": "v.e/b", "faults": {"flap": [{"device": "b-0", "period": "soon"}]}}]}"#,
            "resources[1].faults.flap[0].period: invalid duration",
        ),
        (
            r#"{"resources": [{"resource": "v.e/a", "devices": [{"id": "a0", "numa": "zero"}]}]}"#,
            "resources[0].devices[0].numa: ",
        ),
        (
            r#"{"resources": [{"resource": "v.e/a", "allocate": {"container": {"mounts": [{"hostPath": "/x"}]}}}]}"#,
            "resources[0].allocate.container.mounts[0]: missing field `containerPath`",
        ),
    ] {
        std::fs::write(&cfg, json).unwrap();
        let r = run_cmd(serve_cmd(d.path(), &["--no-register", "--config", s(&cfg)])).await;
        assert_eq!(r.code, 2, "{json}: {}", r.stderr);
        let want = format!("dpctl: {}: {path}", cfg.display());
        assert!(r.stderr.starts_with(&want), "{json}:\nwant {want}\ngot  {}", r.stderr);
        assert!(r.stderr.contains("see `dpctl serve --help`"), "{}", r.stderr);
        assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    }
}

/// The same rule broken through a flag names the flag that sets the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_flag_errors_name_the_flag() {
    let d = tmp();
    for (args, want) in [
        (
            &["--resource", "v.e/foo", "--pre-start-latency", "1s"][..],
            "dpctl: --pre-start-latency: needs preStart: true",
        ),
        (&["--resource", "v.e/foo", "--pre-start-fail"], "dpctl: --pre-start-fail: needs preStart: true"),
        (&["--resource", "v.e/foo", "--count", "2", "--flap", "zz:1s"], "dpctl: --flap: no device \"zz\""),
        (&["--resource", "v.e/foo", "--id-pattern", "same"], "dpctl: --id-pattern: \"same\" has no {i}"),
        (
            &["--resource", "v.e/foo", "--socket-name", "kubelet.sock"],
            "dpctl: --socket-name: \"kubelet.sock\" is the kubelet's",
        ),
    ] {
        let mut a = vec!["--no-register"];
        a.extend(args);
        let r = run_cmd(serve_cmd(d.path(), &a)).await;
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with(want), "{args:?}: {}", r.stderr);
    }
}
