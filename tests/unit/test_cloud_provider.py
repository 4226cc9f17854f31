"""cloud_provider: the name each component gets, the cloud config file on every node, and the providers
Kubernetes no longer runs refused at their line."""

from __future__ import annotations

import json
from functools import cache

import pytest

from rke_py.config import load_text
from rke_py.errors import ConfigError
from rke_py.pki.bundle import build_bundle
from rke_py.plan import build_plan
from rke_py.plan.model import ClusterPlan, ContainerSpec

NODES = """\
kubernetes_version: {version}
nodes:
- {{address: 10.0.0.1, user: root, role: [etcd, controlplane]}}
- {{address: 10.0.0.2, internal_address: 10.1.0.2, user: root, role: [worker]}}
"""
V128 = "v1.28.14-rancher1-1"
V130 = "v1.30.4-rancher1-1"


def text(cloud: str, version: str = V128) -> str:
    return NODES.format(version=version) + "cloud_provider:\n" + cloud


@cache
def plan(cloud: str, version: str = V128) -> ClusterPlan:
    config = load_text(text(cloud, version)).config
    return build_plan(config, build_bundle(config))


def spec(cloud: str, address: str, name: str) -> ContainerSpec:
    node = next(n for n in plan(cloud).nodes if n.address == address)
    return next(p.spec for p in node.placed if p.spec.name == name)


def flag(container: ContainerSpec, name: str) -> str | None:
    prefix = f"--{name}="
    values = [arg[len(prefix) :] for arg in container.entrypoint if arg.startswith(prefix)]
    return values[0] if values else None


def cloud_file(cloud: str, address: str, version: str = V128) -> str | None:
    node = next(n for n in plan(cloud, version).nodes if n.address == address)
    found = [f for f in node.files if f.path == "/etc/kubernetes/cloud-config"]
    if not found:
        return None
    text = found[0].content.decode()
    assert text.endswith("\n")  # RKE's file-deployer echoes the config into the file: one more newline
    return text[:-1]


def errors(cloud: str, version: str = V128) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_text(text(cloud, version))
    return [str(p) for p in err.value.problems]


WITH_COMPONENTS = [
    ("10.0.0.1", "kube-apiserver"),
    ("10.0.0.1", "kube-controller-manager"),
    ("10.0.0.1", "kubelet"),
    ("10.0.0.2", "kubelet"),
]


def test_without_a_provider_the_flag_is_empty_as_rke_writes_it() -> None:
    for address, name in WITH_COMPONENTS:
        container = spec("  name: ''\n", address, name)
        assert flag(container, "cloud-provider") == ""
        assert flag(container, "cloud-config") is None
        assert not any(e.startswith("RKE_CLOUD_CONFIG_CHECKSUM=") for e in container.env)
    assert cloud_file("  name: ''\n", "10.0.0.2") is None


def test_external_reaches_every_component_with_the_file_and_its_checksum() -> None:
    cloud = "  name: external\n"
    for address, name in WITH_COMPONENTS:
        container = spec(cloud, address, name)
        assert flag(container, "cloud-provider") == "external"
        assert flag(container, "cloud-config") == "/etc/kubernetes/cloud-config"
        assert "RKE_CLOUD_CONFIG_CHECKSUM=d41d8cd98f00b204e9800998ecf8427e" in container.env  # md5 of ""
        assert "/etc/kubernetes/cloud-config" in container.files
    assert cloud_file(cloud, "10.0.0.1") == cloud_file(cloud, "10.0.0.2") == ""
    # RKE binds kube-proxy to the node's address: a cloud provider may rename the Node
    assert flag(spec(cloud, "10.0.0.2", "kube-proxy"), "bind-address") == "10.1.0.2"


def test_external_aws_is_external_and_can_leave_the_hostname_to_the_metadata() -> None:
    cloud = "  name: external-aws\n  useInstanceMetadataHostname: true\n"
    assert flag(spec(cloud, "10.0.0.2", "kubelet"), "cloud-provider") == "external"
    assert flag(spec(cloud, "10.0.0.2", "kubelet"), "hostname-override") is None
    assert flag(spec(cloud, "10.0.0.2", "kube-proxy"), "hostname-override") is None
    assert flag(spec("  name: external\n", "10.0.0.2", "kubelet"), "hostname-override") == "10.0.0.2"


def test_the_provider_is_picked_from_its_settings_alone_and_name_renames_it() -> None:
    vsphere = "  vsphereCloudProvider:\n    global: {user: u, password: p}\n"
    assert flag(spec(vsphere, "10.0.0.1", "kubelet"), "cloud-provider") == "vsphere"
    renamed = "  name: external\n" + vsphere
    assert flag(spec(renamed, "10.0.0.1", "kubelet"), "cloud-provider") == "external"
    assert "[Global]" in (cloud_file(renamed, "10.0.0.2") or "")


def test_vsphere_file_is_rke_s_template_line_for_line() -> None:
    cloud = (
        "  vsphereCloudProvider:\n"
        "    global: {user: admin, password: pw, insecure-flag: true, soap-roundtrip-count: 2}\n"
        "    virtual_center:\n"
        "      vc2.example.com: {user: b, password: y, datacenters: dc2}\n"
        "      vc1.example.com: {user: a, password: x, port: '443'}\n"
        "    workspace: {server: vc1.example.com, datacenter: dc1, folder: k8s}\n"
        "    disk: {scsicontrollertype: pvscsi}\n"
    )
    t = " " * 8
    assert cloud_file(cloud, "10.0.0.1") == (
        '\n[Global]\nuser = "admin"\npassword = "pw"\ninsecure-flag = "true"\nsoap-roundtrip-count = "2"\n\n'
        f'\n[VirtualCenter "vc1.example.com"]\n{t}user = "a"\n{t}password = "x"\n{t}port = "443"\n'
        f'{t}soap-roundtrip-count = "0"'
        f'\n[VirtualCenter "vc2.example.com"]\n{t}user = "b"\n{t}password = "y"\n{t}datacenters = "dc2"\n'
        f'{t}soap-roundtrip-count = "0"'
        f'\n\n[Workspace]\n{t}server = "vc1.example.com"\n{t}datacenter = "dc1"\n{t}folder = "k8s"\n'
        f'{t}default-datastore = ""\n{t}resourcepool-path = ""'
        f"\n\n[Disk]\n{t}scsicontrollertype = pvscsi\n\n[Network]\n"
    )


def test_azure_file_is_rke_s_json_every_field_in_its_order() -> None:
    cloud = "  azureCloudProvider: {tenantId: t1, aadClientSecret: s3cret, cloudProviderBackoff: true}\n"
    content = cloud_file(cloud, "10.0.0.2") or ""
    data = json.loads(content)
    assert list(data)[:3] == ["cloud", "tenantId", "subscriptionId"]
    assert data["tenantId"] == "t1" and data["cloudProviderBackoff"] is True
    assert data["cloudProviderBackoffRetries"] == 0 and "tags" not in data  # zero values; omitempty left out
    assert content.startswith('{\n\n"cloud": "",\n\n"tenantId": "t1",')  # MarshalIndent(cfg, "", "\n")


def test_harvester_and_custom_write_the_given_file() -> None:
    harvester = "  harvesterCloudProvider:\n    cloud_config: 'kubeconfig: x'\n"
    assert flag(spec(harvester, "10.0.0.1", "kubelet"), "cloud-provider") == "external"
    assert cloud_file(harvester, "10.0.0.1") == "kubeconfig: x"
    custom = '  name: gce\n  customCloudProvider: "[Global]\\nproject-id = p"\n'
    assert flag(spec(custom, "10.0.0.1", "kube-apiserver"), "cloud-provider") == "gce"
    assert cloud_file(custom, "10.0.0.2") == "[Global]\nproject-id = p"


def test_the_file_is_written_as_a_secret() -> None:
    node = plan("  azureCloudProvider: {aadClientSecret: s3cret}\n").nodes[1]
    (written,) = [f for f in node.files if f.path == "/etc/kubernetes/cloud-config"]
    assert written.secret and written.mode == 0o600


@pytest.mark.parametrize(
    ("cloud", "version", "expected"),
    [
        (
            "  name: aws\n",
            V128,
            "cluster.yml:6:3: the in-tree aws cloud provider was removed in Kubernetes v1.27",
        ),
        (
            "  awsCloudProvider: {global: {zone: a}}\n",
            V128,
            "cluster.yml:6:3: the in-tree aws cloud provider was removed in Kubernetes v1.27",
        ),
        (
            "  openstackCloudProvider: {global: {auth-url: 'https://k:5000/v3'}}\n",
            V128,
            "cluster.yml:6:3: the in-tree openstack cloud provider was removed in Kubernetes v1.26",
        ),
        (
            "  azureCloudProvider: {tenantId: t}\n",
            V130,
            "cluster.yml:6:3: the in-tree azure cloud provider is off in Kubernetes v1.29 and later",
        ),
        ("  name: vsphere\n", V128, "cluster.yml:6:3: cloud provider vsphere needs its vsphereCloudProvider"),
        ("  customCloudProvider: x\n", V128, "cluster.yml:6:3: a custom cloud provider needs a name"),
        ("  name: amazon\n", V128, 'cluster.yml:6:3: unknown cloud provider "amazon"'),
        (
            "  vsphereCloudProvider: {global: {password: 'a\"b'}}\n",
            V128,
            "cluster.yml:6:35: password must be one line without double quotes",
        ),
        (
            "  vsphereCloudProvider: {virtual_center: {'vc1;rm -rf': {user: a}}}\n",
            V128,
            'cluster.yml:6:43: "vc1;rm -rf" is not a vCenter host name or address',
        ),
        (
            "  azureCloudProvider: {cloudProviderBackoffRetries: many}\n",
            V128,
            "cluster.yml:6:24: cloudProviderBackoffRetries must be a whole number",
        ),
    ],
)
def test_what_kubernetes_cannot_run_is_refused_at_its_line(cloud: str, version: str, expected: str) -> None:
    found = errors(cloud, version)
    assert any(e.startswith(expected) for e in found), found


def test_the_way_forward_is_named() -> None:
    (message,) = errors("  azureCloudProvider: {tenantId: t}\n", V130)
    assert "set name: external" in message and "keep the azureCloudProvider sub-object" in message


def test_in_tree_azure_on_1_28_and_out_of_tree_on_1_30_are_accepted() -> None:
    assert load_text(text("  azureCloudProvider: {tenantId: t}\n")).warnings == []
    assert load_text(text("  name: external\n  azureCloudProvider: {tenantId: t}\n", V130)).warnings == []


def test_unknown_settings_and_a_stray_metadata_flag_warn_at_their_line() -> None:
    loaded = load_text(
        text("  name: external\n  useInstanceMetadataHostname: true\n  azureCloudProvider: {tennant: t}\n")
    )
    assert [str(w).split(" — ")[0] for w in loaded.warnings] == [
        "cluster.yml:7:3: warning: useInstanceMetadataHostname is only used with the external-aws "
        "cloud provider",
        'cluster.yml:8:24: warning: "tennant" is not a setting RKE writes into the cloud config file; '
        "it is ignored",
    ]
