// Command kubeconfig is client-go's own reading of kubeconfigs, the oracle
// dpctl's kubeconfig reader is compared with (tests/e2e/kubeconfig.rs).
//
//	kubeconfig [-kubeconfig FILE] [-context NAME] [-request]
//
// It loads as every client-go program does: clientcmd's default loading
// rules (KUBECONFIG's files merged, or -kubeconfig alone) through
// NewNonInteractiveDeferredLoadingClientConfig, then ClientConfig() into a
// rest.Config. With -request it also builds the transport (rest's
// TransportConfig and HTTPWrappersForConfig, where an exec plugin's
// authenticator is wired in) and sends one request through it to a recorder
// that never touches the network, so an exec plugin runs as it would for a
// real request. The exec authenticator is told, as dpctl tells itself, that
// standard input is unavailable (StdinUnavailable), so interactiveMode
// Always fails the way it fails under dpctl.
//
// It prints one JSON line: the resolved server, TLS settings, credentials
// (static and what the plugin gave), the exec section, or {"stage":...,
// "error":...} with client-go's error text and exit 0 (the error is the
// answer). The auth-provider plugins are linked in, as in kubectl, so a gcp
// or azure provider gets client-go's "has been removed" text.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"

	// The auth-provider stubs and oidc, registered as kubectl registers them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
)

// The reason dpctl gives for running credential plugins without a terminal
// (src/client/kube/exec.rs, STDIN_UNAVAILABLE).
const stdinUnavailable = "dpctl runs credential plugins without a terminal; set interactiveMode to IfAvailable or Never"

// recorder answers every request itself, remembering its Authorization header.
type recorder struct{ authorization string }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.authorization = req.Header.Get("Authorization")
	return &http.Response{StatusCode: 200, Body: http.NoBody, Request: req, Header: http.Header{}}, nil
}

func emit(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(b))
}

func main() {
	explicit := flag.String("kubeconfig", "", "a kubeconfig file, read alone (else KUBECONFIG's files merged)")
	context := flag.String("context", "", "the context to use (else current-context)")
	request := flag.Bool("request", false, "build the transport and send one request through it (runs an exec plugin)")
	flag.Parse()

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *explicit
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: *context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		emit(map[string]any{"stage": "config", "error": err.Error()})
		return
	}
	out := map[string]any{
		"host":       cfg.Host,
		"ca":         cfg.CAFile != "" || len(cfg.CAData) > 0,
		"caFile":     cfg.CAFile,
		"insecure":   cfg.Insecure,
		"serverName": cfg.ServerName,
		"token":      cfg.BearerToken,
		"tokenFile":  cfg.BearerTokenFile,
		"certFile":   cfg.CertFile,
		"keyFile":    cfg.KeyFile,
		"certData":   len(cfg.CertData) > 0,
		"username":   cfg.Username,
	}
	if cfg.Proxy != nil {
		req, err := http.NewRequest("GET", cfg.Host, nil)
		if err != nil {
			emit(map[string]any{"stage": "config", "error": err.Error()})
			return
		}
		u, err := cfg.Proxy(req)
		if err != nil {
			emit(map[string]any{"stage": "config", "error": err.Error()})
			return
		}
		if u != nil {
			out["proxy"] = u.String()
		}
	}
	if e := cfg.ExecProvider; e != nil {
		env := map[string]string{}
		for _, v := range e.Env {
			env[v.Name] = v.Value
		}
		out["exec"] = map[string]any{
			"command": e.Command, "args": e.Args, "env": env, "apiVersion": e.APIVersion,
			"interactiveMode": string(e.InteractiveMode), "provideClusterInfo": e.ProvideClusterInfo,
			"installHint": e.InstallHint,
		}
		e.StdinUnavailable = true
		e.StdinUnavailableMessage = stdinUnavailable
	}
	if *request {
		tc, err := cfg.TransportConfig()
		if err != nil {
			emit(map[string]any{"stage": "transport", "error": err.Error()})
			return
		}
		// The TLS configuration as the real transport builds it (CA, certificates, conflicts).
		if _, err := transport.TLSConfigFor(tc); err != nil {
			emit(map[string]any{"stage": "transport", "error": err.Error()})
			return
		}
		rec := &recorder{}
		rt, err := transport.HTTPWrappersForConfig(tc, rec)
		if err != nil {
			emit(map[string]any{"stage": "transport", "error": err.Error()})
			return
		}
		req, err := http.NewRequest("GET", cfg.Host+"/version", nil)
		if err != nil {
			emit(map[string]any{"stage": "transport", "error": err.Error()})
			return
		}
		if _, err := rt.RoundTrip(req); err != nil {
			emit(map[string]any{"stage": "credentials", "error": err.Error()})
			return
		}
		out["authorization"] = rec.authorization
		if h := tc.TLS.GetCertHolder; h != nil && h.GetCert != nil {
			cert, err := h.GetCert()
			if err != nil {
				emit(map[string]any{"stage": "credentials", "error": err.Error()})
				return
			}
			out["execCert"] = cert != nil
		}
	}
	emit(out)
}
