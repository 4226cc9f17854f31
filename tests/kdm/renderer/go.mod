module rke-py.local/kdm-renderer

go 1.21
