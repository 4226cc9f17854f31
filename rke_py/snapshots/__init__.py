"""etcd snapshots as RKE keeps them: the archive format, where they are kept (etcd hosts, S3), and the
one-shot containers that save and restore them on hosts."""
