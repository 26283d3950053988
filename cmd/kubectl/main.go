// Command kubectl is the upstream kubectl (k8s.io/kubectl at the version pinned
// in this module's go.mod), built from source so that kgate's end-to-end tests
// drive a known kubectl and never whatever is installed on the machine.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Import to initialize client auth plugins.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	// kubectl initializes logging before it parses flags, so the verbosity
	// flag is read from the raw arguments first, as upstream does.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		// Pretty-print the error and exit with an error.
		util.CheckErr(err)
	}
}
