"""What people read after `up` and `plan`: one row per container change, file writes summed per host."""

from rich.console import Console

from rke_py.cli.render import print_actions
from rke_py.deploy.actions import Action
from rke_py.plan.model import FileSpec


def test_file_writes_are_one_row_per_host_and_container_changes_are_listed():
    files = [
        Action("write-file", "files", f"/etc/kubernetes/ssl/{i}.pem", "missing", file=FileSpec(str(i), b""))
        for i in range(30)
    ]
    files.append(Action("write-file", "files", "/etc/kubernetes/nginx-proxy/nginx.conf", "content changed"))
    actions = {"10.0.0.5": [*files, Action("replace", "worker", "nginx-proxy", "spec changed")]}
    out = Console(width=200, record=True)
    print_actions(out, actions, title="Changes")
    text = out.export_text()
    assert "31 files" in text and "30 missing, 1 content changed" in text
    assert "nginx-proxy" in text and "spec changed" in text
    assert "/etc/kubernetes/ssl/0.pem" not in text
