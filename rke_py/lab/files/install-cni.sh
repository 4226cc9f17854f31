#!/bin/sh
# What RKE's flannel-cni image does as the install-cni container of flannel's DaemonSet: put the CNI plugins
# (flannel and those it delegates to) on the host, write the network config the template hands it
# ($CNI_NETWORK_CONFIG) as /etc/cni/net.d/$CNI_CONF_NAME, then stay (RKE runs it as a container, not an
# init container). Each file is written under a temporary name and renamed, so the kubelet never reads half.
set -e
for plugin in /opt/cni/bin/*; do
    name=$(basename "$plugin")
    cp "$plugin" "/host/opt/cni/bin/.$name.tmp"
    mv "/host/opt/cni/bin/.$name.tmp" "/host/opt/cni/bin/$name"
done
printf '%s\n' "$CNI_NETWORK_CONFIG" >"/host/etc/cni/net.d/.$CNI_CONF_NAME.tmp"
mv "/host/etc/cni/net.d/.$CNI_CONF_NAME.tmp" "/host/etc/cni/net.d/$CNI_CONF_NAME"
echo "CNI plugins installed, /etc/cni/net.d/$CNI_CONF_NAME written"
trap 'exit 0' TERM
while :; do
    sleep 3600 &
    wait $!
done
