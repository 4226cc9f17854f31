"""`vagrant ssh-config` output in, cluster nodes out: the parser, the address rule, and --from-vagrant."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from rke_py.cli import main
from rke_py.config import load
from rke_py.config.generate import roles_by_count
from rke_py.config.vagrant import VagrantError, nodes_from_vagrant, parse_ssh_config, private_address
from rke_py.errors import ExitStatus

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vagrant"
VAGRANTFILE = Path(__file__).parents[2] / "vagrant" / "Vagrantfile"
ALICE = "/home/alice/My Projects/rke-py/vagrant/.vagrant/machines/{}/virtualbox/private_key"
BOB = "/home/bob/src/rke-py/vagrant/.vagrant/machines/{}/libvirt/private_key"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    captured = capsys.readouterr()
    return int(exit_info.value.code), captured.out, captured.err


def test_virtualbox_three_machines():
    hosts = parse_ssh_config(fixture("virtualbox-3.ssh-config"))
    assert [(h.name, h.hostname, h.port, h.user) for h in hosts] == [
        ("node-1", "127.0.0.1", 2222, "vagrant"),
        ("node-2", "127.0.0.1", 2200, "vagrant"),
        ("node-3", "127.0.0.1", 2201, "vagrant"),
    ]
    # Quoted because of the space in "My Projects"; the quotes are not part of the path.
    assert [h.identity_files for h in hosts] == [[ALICE.format(f"node-{i}")] for i in (1, 2, 3)]
    assert hosts[0].options["identitiesonly"] == "yes"
    assert hosts[0].options["stricthostkeychecking"] == "no"
    assert hosts[0].options["userknownhostsfile"] == "/dev/null"


def test_libvirt_three_machines():
    hosts = parse_ssh_config(fixture("libvirt-3.ssh-config"))
    assert [(h.name, h.hostname, h.port) for h in hosts] == [
        ("node-1", "192.168.121.23", 22),
        ("node-2", "192.168.121.187", 22),
        ("node-3", "192.168.121.64", 22),
    ]
    assert hosts[2].identity_files == [BOB.format("node-3")]
    assert hosts[0].options["hostkeyalgorithms"] == "+ssh-rsa"


def test_recorded_libvirt_output_gives_the_private_addresses_and_each_machines_key():
    # What `vagrant ssh-config` printed for three libvirt machines: management addresses, per-machine keys.
    hosts = parse_ssh_config(fixture("libvirt-3-recorded.ssh-config"))
    assert [h.hostname.startswith("192.168.121.") for h in hosts] == [True] * 3
    nodes = nodes_from_vagrant(hosts)
    assert [(n.address, n.internal_address, n.port, n.user) for n in nodes] == [
        (f"192.168.56.1{i}", f"192.168.56.1{i}", 22, "vagrant") for i in (1, 2, 3)
    ]
    assert [n.ssh_key_path.split("/.vagrant/")[1] for n in nodes] == [
        f"machines/node-{i}/libvirt/private_key" for i in (1, 2, 3)
    ]


def test_repeated_identity_files_are_kept_in_order():
    [host] = parse_ssh_config(fixture("virtualbox-1-default.ssh-config"))
    assert host.name == "default"
    assert host.identity_files == [
        "/home/carol/.vagrant.d/insecure_private_keys/vagrant.key.ed25519",
        "/home/carol/.vagrant.d/insecure_private_keys/vagrant.key.rsa",
    ]


def test_output_without_machines_is_an_error():
    with pytest.raises(VagrantError, match="no machines"):
        parse_ssh_config("\n")


def test_private_addresses_follow_the_vagrantfile_rule():
    assert private_address("node-1") == "192.168.56.11"
    assert private_address("node-12") == "192.168.56.22"
    assert private_address("node-244") == "192.168.56.254"
    assert private_address("node-245") is None
    assert private_address("node-0") is None
    assert private_address("default") is None
    assert private_address("my-node-1") is None


def test_the_vagrantfile_states_the_same_rule():
    text = VAGRANTFILE.read_text()
    assert 'SUBNET = "192.168.56"' in text
    assert '"#{SUBNET}.#{10 + index}"' in text
    assert 'name = "node-#{index}"' in text


@pytest.mark.parametrize("fixture_name", ["virtualbox-3.ssh-config", "libvirt-3.ssh-config"])
def test_named_machines_use_their_private_address_on_port_22(fixture_name: str):
    nodes = nodes_from_vagrant(parse_ssh_config(fixture(fixture_name)))
    assert [(n.address, n.internal_address, n.port) for n in nodes] == [
        (f"192.168.56.1{i}", f"192.168.56.1{i}", 22) for i in (1, 2, 3)
    ]
    assert [n.hostname_override for n in nodes] == ["node-1", "node-2", "node-3"]
    assert [n.user for n in nodes] == ["vagrant"] * 3
    assert [n.roles for n in nodes] == roles_by_count(3)


def test_an_unnamed_machine_with_a_routable_address_is_used_as_vagrant_reaches_it():
    [node] = nodes_from_vagrant(parse_ssh_config(fixture("libvirt-1-default.ssh-config")))
    assert (node.address, node.port, node.internal_address, node.hostname_override) == (
        "192.168.121.57",
        22,
        "",
        "",
    )
    assert node.ssh_key_path == "/home/bob/VMs/single node/.vagrant/machines/default/libvirt/private_key"


def test_a_forwarded_port_alone_is_refused_with_what_to_do():
    with pytest.raises(VagrantError) as info:
        nodes_from_vagrant(parse_ssh_config(fixture("virtualbox-1-default.ssh-config")))
    message = str(info.value)
    assert "only reachable through a forwarded port (127.0.0.1:2222)" in message
    assert "node-<i>" in message
    assert "--node" in message


def test_a_cluster_key_replaces_the_vagrant_keys():
    nodes = nodes_from_vagrant(parse_ssh_config(fixture("virtualbox-3.ssh-config")), cluster_key=True)
    assert [n.ssh_key_path for n in nodes] == ["", "", ""]


@pytest.mark.parametrize(
    ("fixture_name", "keys"),
    [
        ("virtualbox-3.ssh-config", [ALICE.format(f"node-{i}") for i in (1, 2, 3)]),
        ("libvirt-3.ssh-config", [BOB.format(f"node-{i}") for i in (1, 2, 3)]),
        ("virtualbox-1.ssh-config", [ALICE.format("node-1")]),
    ],
)
def test_from_vagrant_writes_a_cluster_yml_rke_py_accepts(capsys, tmp_path: Path, fixture_name, keys):
    path = tmp_path / "cluster.yml"
    code, out, err = run(
        capsys, "config", "--name", str(path), "--vagrant-ssh-config", str(FIXTURES / fixture_name)
    )
    assert code == ExitStatus.OK, err
    assert out.startswith(f"Wrote {path} (")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    loaded = load(path)
    assert loaded.warnings == []
    nodes = loaded.config.nodes
    count = len(keys)
    addresses = [f"192.168.56.{11 + i}" for i in range(count)]
    assert [n.address for n in nodes] == addresses
    assert [n.internal_address for n in nodes] == addresses
    assert [n.port for n in nodes] == ["22"] * count
    assert [n.user for n in nodes] == ["vagrant"] * count
    assert [n.ssh_key_path for n in nodes] == keys
    assert [n.name for n in nodes] == [f"node-{i + 1}" for i in range(count)]
    assert [n.role for n in nodes] == roles_by_count(count)


def test_from_vagrant_with_a_cluster_key(capsys, tmp_path: Path):
    path = tmp_path / "cluster.yml"
    recorded = str(FIXTURES / "virtualbox-3.ssh-config")
    args = (
        "config",
        "--name",
        str(path),
        "--vagrant-ssh-config",
        recorded,
        "--ssh-key-path",
        "~/.ssh/id_ed25519",
    )
    code, _, err = run(capsys, *args)
    assert code == ExitStatus.OK, err
    config = load(path).config
    assert config.ssh_key_path == "~/.ssh/id_ed25519"
    assert [n.ssh_key_path for n in config.nodes] == ["~/.ssh/id_ed25519"] * 3


def test_from_vagrant_refuses_a_forwarded_port_and_writes_nothing(capsys, tmp_path: Path):
    path = tmp_path / "cluster.yml"
    recorded = str(FIXTURES / "virtualbox-1-default.ssh-config")
    code, _, err = run(capsys, "config", "--name", str(path), "--vagrant-ssh-config", recorded)
    assert code == ExitStatus.ERROR
    assert "forwarded port" in err
    assert not path.exists()


def test_from_vagrant_needs_a_vagrantfile(capsys, tmp_path: Path):
    code, _, err = run(capsys, "config", "--print", "--from-vagrant", str(tmp_path))
    assert code == ExitStatus.ERROR
    assert f"{tmp_path} has no Vagrantfile" in err


def test_from_vagrant_without_vagrant_installed_says_so(capsys, tmp_path: Path, monkeypatch):
    (tmp_path / "Vagrantfile").write_text(VAGRANTFILE.read_text())
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, _, err = run(capsys, "config", "--print", "--from-vagrant", str(tmp_path))
    assert code == ExitStatus.ERROR
    assert "vagrant is not installed" in err
    assert "--vagrant-ssh-config FILE" in err
