"""Flag parsing of the lab Kubernetes components: the real names are accepted, anything else refused."""

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rke_py.lab.kube import flags
from rke_py.lab.kube.__main__ import main
from rke_py.lab.kube.kubeconfig import KubeconfigError, parse_yaml
from rke_py.lab.kube.kubelet import parse_taints

# The flags rke-py renders for k8s 1.24-1.31 (reference rke.md §4.2), per component.
RKE_FLAGS = {
    "kube-apiserver": (
        "--admission-control-config-file=/a --advertise-address=10.0.0.1 --allow-privileged=true "
        "--anonymous-auth=false --api-audiences=unknown --audit-log-format=json --audit-log-maxage=30 "
        "--audit-log-maxbackup=10 --audit-log-maxsize=100 "
        "--audit-log-path=/var/log/kube-audit/audit-log.json "
        "--audit-policy-file=/p --authorization-mode=Node,RBAC --bind-address=0.0.0.0 --client-ca-file=/ca "
        "--cloud-provider= --enable-admission-plugins=NamespaceLifecycle,NodeRestriction "
        "--etcd-cafile=/ca --etcd-certfile=/c --etcd-keyfile=/k --etcd-prefix=/registry "
        "--etcd-servers=https://10.0.0.1:2379 --encryption-provider-config=/e "
        "--kubelet-client-certificate=/c --kubelet-client-key=/k "
        "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname --profiling=false "
        "--proxy-client-cert-file=/c --proxy-client-key-file=/k --requestheader-allowed-names=x "
        "--requestheader-client-ca-file=/ca --requestheader-extra-headers-prefix=X-Remote-Extra- "
        "--requestheader-group-headers=X-Remote-Group --requestheader-username-headers=X-Remote-User "
        "--runtime-config=authorization.k8s.io/v1beta1=true --secure-port=6443 --service-account-issuer=rke "
        "--service-account-key-file=/k --service-account-lookup=true --service-account-signing-key-file=/k "
        "--service-cluster-ip-range=10.43.0.0/16 --service-node-port-range=30000-32767 "
        "--storage-backend=etcd3 --tls-cert-file=/c --tls-private-key-file=/k "
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 --v=2"
    ),
    "kube-controller-manager": (
        "--allocate-node-cidrs=true --allow-untagged-cloud=true --authentication-kubeconfig=/k "
        "--authorization-kubeconfig=/k --cloud-provider= --cluster-cidr=10.42.0.0/16 "
        "--configure-cloud-routes=false --enable-hostpath-provisioner=false --kubeconfig=/k "
        "--leader-elect=true "
        "--node-monitor-grace-period=40s --profiling=false --root-ca-file=/ca "
        "--service-account-private-key-file=/k --service-cluster-ip-range=10.43.0.0/16 "
        "--terminated-pod-gc-threshold=1000 --v=2 --use-service-account-credentials=true"
    ),
    "kube-scheduler": (
        "--kubeconfig=/k --authentication-kubeconfig=/k --authorization-kubeconfig=/k --leader-elect=true "
        "--profiling=false --v=2"
    ),
    "kubelet": (
        "--address=0.0.0.0 --anonymous-auth=false --authentication-token-webhook=true "
        "--authorization-mode=Webhook --cgroups-per-qos=True --client-ca-file=/ca --cloud-provider= "
        "--cluster-dns=10.43.0.10 --cluster-domain=cluster.local "
        "--container-runtime-endpoint=unix:///var/run/cri-dockerd.sock --event-qps=0 --fail-swap-on=false "
        "--hostname-override=lab-1 --kubeconfig=/k --make-iptables-util-chains=true --node-ip=10.0.0.2 "
        "--pod-infra-container-image=rancher/mirrored-pause:3.7 --read-only-port=0 "
        "--register-with-taints=node-role.kubernetes.io/controlplane=true:NoSchedule "
        "--resolv-conf=/etc/resolv.conf --root-dir=/var/lib/kubelet --streaming-connection-idle-timeout=30m "
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 --v=2 "
        "--volume-plugin-dir=/var/lib/kubelet/volumeplugins --cgroup-driver=cgroupfs"
    ),
    "kube-proxy": (
        "--cluster-cidr=10.42.0.0/16 --healthz-bind-address=127.0.0.1 --hostname-override=lab-1 "
        "--kubeconfig=/k --v=2 --bind-address=10.0.0.2"
    ),
}


@pytest.mark.parametrize("component", sorted(RKE_FLAGS))
def test_every_flag_rke_renders_is_accepted(component: str) -> None:
    args = RKE_FLAGS[component].split()
    parsed = flags.parse(component, args)
    assert len(parsed.values) == len(args)
    assert parsed.get("v") == 2


def test_values_are_typed_like_the_real_binaries() -> None:
    parsed = flags.parse(
        "kube-controller-manager",
        [
            "--leader-elect",
            "--leader-elect-lease-duration",
            "1m30s",
            "--secure-port=10257",
            "--cloud-provider=",
        ],
    )
    assert parsed.get("leader-elect") is True
    assert parsed.get("leader-elect-lease-duration") == 90.0
    assert parsed.get("secure-port") == 10257
    assert parsed.get("cloud-provider") == ""
    assert parsed.get("leader-elect-retry-period", 2.0) == 2.0
    assert flags.parse("kubelet", ["--cgroups-per-qos=True"]).get("cgroups-per-qos") is True
    assert flags.parse("kubelet", ["-v=4"]).get("v") == 4
    assert flags.parse("kubelet", ["--streaming-connection-idle-timeout=500ms"]).values == {
        "streaming-connection-idle-timeout": 0.5
    }


@pytest.mark.parametrize(
    ("component", "args", "message"),
    [
        ("kube-apiserver", ["--insecure-port=0"], "unknown flag: --insecure-port"),
        ("kubelet", ["--container-runtime=remote"], "unknown flag: --container-runtime"),
        ("kube-controller-manager", ["--pod-eviction-timeout=5m0s"], "unknown flag: --pod-eviction-timeout"),
        ("kube-scheduler", ["-x"], "unknown shorthand flag: 'x' in -x"),
        ("kube-proxy", ["--kubeconfig"], "flag needs an argument: --kubeconfig"),
        ("kube-scheduler", ["--leader-elect", "true"], 'does not take any arguments, got ["true"]'),
        ("kube-apiserver", ["--secure-port=x"], 'invalid argument "x" for "--secure-port" flag'),
        ("kube-scheduler", ["--leader-elect=yes"], 'strconv.ParseBool: parsing "yes": invalid syntax'),
        ("kube-controller-manager", ["--node-monitor-grace-period=40"], 'time: invalid duration "40"'),
    ],
)
def test_refused_command_lines(component: str, args: list[str], message: str) -> None:
    with pytest.raises(flags.FlagError) as info:
        flags.parse(component, args)
    assert message in str(info.value)


def test_main_prints_the_real_error_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kube-apiserver", "--no-such-flag=1"]) == 1
    assert capsys.readouterr().err == "Error: unknown flag: --no-such-flag\n"


def test_main_dispatches_on_the_program_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["/usr/local/bin/kubelet", "--version"]) == 0
    assert capsys.readouterr().out.startswith("Kubernetes v1.")
    assert main(["/usr/local/bin/kubelet", "--leader-elect"]) == 1
    assert "unknown flag: --leader-elect" in capsys.readouterr().err


def test_register_with_taints() -> None:
    taints = parse_taints("node-role.kubernetes.io/controlplane=true:NoSchedule,dedicated:NoExecute")
    assert taints == [
        {"key": "node-role.kubernetes.io/controlplane", "value": "true", "effect": "NoSchedule"},
        {"key": "dedicated", "effect": "NoExecute"},
    ]
    with pytest.raises(flags.FlagError, match="invalid taint spec"):
        parse_taints("a=b:Sometimes")


def test_kubeconfig_yaml_subset() -> None:
    text = (
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: QUJD\n"
        '    server: "https://127.0.0.1:6443"\n  name: local   # the only one\ncontexts:\n'
        "  - context:\n      cluster: local\n      user: 'kube-admin'\n    name: local\n"
        "current-context: local\nusers: []\npreferences: {}\n"
    )
    data = parse_yaml(text)
    assert data["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert data["clusters"][0]["name"] == "local"
    assert data["contexts"][0]["context"]["user"] == "kube-admin"
    assert data["users"] == [] and data["preferences"] == {}
    with pytest.raises(KubeconfigError):
        parse_yaml("a: &anchor x\n")


def test_components_need_only_the_standard_library() -> None:
    """The lab image has a bare python3: import every module with site-packages switched off."""
    modules = [p.stem for p in Path(flags.__file__).parent.glob("*.py") if p.stem != "__init__"]
    code = "; ".join(f"import rke_py.lab.kube.{m}" for m in modules)
    repo = Path(flags.__file__).parents[3]
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=repo, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture
def keep_sigterm() -> Iterator[None]:
    """main() installs a SIGTERM handler, as a component should; give the test process its own back."""
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.usefixtures("keep_sigterm")
def test_a_broken_kubeconfig_ends_the_component_with_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubecfg.yaml"
    kubeconfig.write_text("clusters: [\n")
    assert main(["kube-scheduler", f"--kubeconfig={kubeconfig}", "--secure-port=0"]) == 1
    err = capsys.readouterr().err
    assert "unsupported YAML value" in err and "Traceback" not in err

    kubeconfig.write_text(
        "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
        f"users:\n- name: u\n  user:\n    client-certificate: {tmp_path}/missing.pem\n"
        f"    client-key: {tmp_path}/missing-key.pem\n"
    )
    assert main(["kube-proxy", f"--kubeconfig={kubeconfig}"]) == 1
    err = capsys.readouterr().err
    assert "No such file or directory" in err and "Traceback" not in err
