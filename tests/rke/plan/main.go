// rke-plan prints, as JSON, what RKE v1.5 would run on each node of a cluster.yml: the processes (containers)
// and files of cluster.BuildRKEConfigNodePlan, the function `rke up` builds every node's containers with,
// computed without touching any host. It is built against RKE's own packages (a GOPATH holding them, see
// tests/rke/rke.py), so nothing of RKE is written here.
//
//	rke-plan CLUSTER_YML [RKESTATE]
//
// RKESTATE gives the secrets encryption config the cluster runs with (RKE makes a new random key otherwise).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/docker/docker/api/types"
	"github.com/rancher/rke/cluster"
	"github.com/rancher/rke/hosts"
	v3 "github.com/rancher/rke/types"
)

// What a lab host's Docker reports (`docker info`), as RKE reads it for a node's plan.
var dockerInfo = types.Info{
	OSType:        "linux",
	Architecture:  "x86_64",
	DockerRootDir: "/var/lib/docker",
	ServerVersion: "20.10.24",
	CgroupDriver:  "cgroupfs",
}

type state struct {
	DesiredState struct {
		EncryptionConfig string `json:"encryptionConfig"`
	} `json:"desiredState"`
	CurrentState struct {
		EncryptionConfig string `json:"encryptionConfig"`
	} `json:"currentState"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rke-plan:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 {
		return fmt.Errorf("usage: rke-plan CLUSTER_YML [RKESTATE]")
	}
	text, err := os.ReadFile(os.Args[1])
	if err != nil {
		return err
	}
	encryption := ""
	if len(os.Args) > 2 {
		raw, err := os.ReadFile(os.Args[2])
		if err != nil {
			return err
		}
		var s state
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		encryption = s.CurrentState.EncryptionConfig
		if encryption == "" {
			encryption = s.DesiredState.EncryptionConfig
		}
	}
	config, err := cluster.ParseConfig(string(text))
	if err != nil {
		return err
	}
	ctx := context.Background()
	flags := cluster.ExternalFlags{ClusterFilePath: os.Args[1]}
	c, err := cluster.InitClusterObject(ctx, config, flags, encryption)
	if err != nil {
		return err
	}
	plan := v3.RKEPlan{}
	for _, host := range hosts.GetUniqueHostList(c.EtcdHosts, c.ControlPlaneHosts, c.WorkerHosts) {
		host.DockerInfo = dockerInfo
		options, err := c.GetKubernetesServicesOptions(host.DockerInfo.OSType, nil)
		if err != nil {
			return err
		}
		plan.Nodes = append(plan.Nodes, cluster.BuildRKEConfigNodePlan(ctx, c, host, options))
	}
	return json.NewEncoder(os.Stdout).Encode(plan)
}
