// Command controlplane is a real Kubernetes control plane for dpctl's tests,
// built from the k8s.io/kubernetes release pinned in go.mod: an embedded etcd
// (go.etcd.io/etcd/server/v3/embed), kube-apiserver (cmd/kube-apiserver/app
// with the options upstream's integration tests start it with), kube-scheduler
// (pkg/scheduler with its default profile, DynamicResources included, as
// test/integration/util.StartScheduler runs it) and the controllers DRA needs
// (the resourceclaim controller and the device-taint eviction controller, as
// kube-controller-manager constructs them; and its serviceaccount and
// root-ca-cert-publisher controllers, so every namespace has its default
// ServiceAccount and kube-root-ca.crt as on a cluster), all in one process.
//
//	controlplane serve -dir DIR [-node NAME]... [-feature-gates LIST] [-runtime-config LIST] [-binding-timeout D] [-v N]
//
// serve writes into DIR: ca.crt (the CA of the serving certificate),
// admin.kubeconfig (https, CA data, a bearer token in group system:masters),
// node-NAME.kubeconfig for each -node (user system:node:NAME in group
// system:nodes, from the static token file tokens.csv, so the Node authorizer
// and NodeRestriction apply to it) and the components' logs to stderr. It
// prints one JSON line {"ready":true,"server":URL,"kubeconfig":PATH,"seconds":S}
// when every component is up, and stops on SIGTERM or SIGINT: the components
// stopped, etcd closed, exit 0.
//
//	controlplane apply -kubeconfig FILE [-dry-run] [-field-manager NAME] FILE...
//
// apply sends every object of the multi-document YAML files as a server-side
// apply patch (force, dry-run=All with -dry-run) through the dynamic client,
// one JSON line per object: {"kind","name","namespace","code":200} or with
// "code", "reason" and "message" from the server's Status. Exit 1 if any failed.
//
//	controlplane token -kubeconfig FILE -namespace NS -serviceaccount SA -pod POD -out FILE
//
// token asks the TokenRequest API for a token of service account SA bound to
// pod POD (so it carries the pod's node name, as a DaemonSet pod's projected
// token does) and writes a kubeconfig with it (the server and CA of -kubeconfig).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	kubeschedulerconfigv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	"k8s.io/kubernetes/pkg/controller/certificates/rootcacertpublisher"
	"k8s.io/kubernetes/pkg/controller/serviceaccount"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: controlplane serve|apply|token ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "apply":
		err = apply(os.Args[2:])
	case "token":
		err = token(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: serve, apply or token", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "controlplane %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

type nodeList []string

func (n *nodeList) String() string     { return strings.Join(*n, ",") }
func (n *nodeList) Set(v string) error { *n = append(*n, v); return nil }

func randomToken() string { return rand.Text() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// pki writes ca.crt, the serving certificate and key (127.0.0.1, localhost),
// and the service-account signing key. ECDSA P-256: fast to make on 2 cores.
func pki(dir string) (caPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dpctl-test-controlplane-ca"},
		NotBefore: now, NotAfter: now.Add(10 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now, NotAfter: now.Add(10 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for _, w := range []struct {
		name, typ string
		der       []byte
		mode      os.FileMode
	}{
		{"ca.crt", "CERTIFICATE", caDER, 0o644},
		{"apiserver.crt", "CERTIFICATE", srvDER, 0o644},
		{"apiserver.key", "EC PRIVATE KEY", srvKeyDER, 0o600},
		{"sa.key", "EC PRIVATE KEY", saKeyDER, 0o600},
	} {
		if err := writePEM(filepath.Join(dir, w.name), w.typ, w.der, w.mode); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

// writeKubeconfig writes a kubeconfig for server with the CA and a bearer token.
func writeKubeconfig(path, server string, caPEM []byte, user, tok string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["controlplane"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tok}
	cfg.Contexts["controlplane"] = &clientcmdapi.Context{Cluster: "controlplane", AuthInfo: user}
	cfg.CurrentContext = "controlplane"
	return clientcmd.WriteToFile(*cfg, path)
}

// startEtcd starts an embedded single-member etcd on free loopback ports,
// configured as k8s.io/apiserver's etcd3/testserver.NewTestConfig does.
func startEtcd(dir string) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.UnsafeNoFsync = true
	cp, err := freePort()
	if err != nil {
		return nil, "", err
	}
	pp, err := freePort()
	if err != nil {
		return nil, "", err
	}
	client := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(cp))}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(pp))}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", errors.New("etcd took more than 60 s to start")
	}
	return e, client.String(), nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dir := fs.String("dir", "", "where to write the kubeconfigs, CA, token file and etcd's data")
	var nodes nodeList
	fs.Var(&nodes, "node", "a node identity system:node:NAME (repeatable): DIR/node-NAME.kubeconfig")
	gates := fs.String("feature-gates", "", "kube-apiserver --feature-gates (every component reads the same gates)")
	runtimeConfig := fs.String("runtime-config", "", "kube-apiserver --runtime-config")
	verbosity := fs.String("v", "0", "klog verbosity")
	bindingTimeout := fs.Duration("binding-timeout", 0, "kube-scheduler's DynamicResources bindingTimeout (0: its default, 10m)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-dir is required")
	}
	start := time.Now()
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	if err := klogFlags.Set("v", *verbosity); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	caPEM, err := pki(*dir)
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	adminToken := randomToken()
	var tokens bytes.Buffer
	fmt.Fprintf(&tokens, "%s,admin,admin-uid,\"system:masters\"\n", adminToken)
	nodeTokens := map[string]string{}
	for _, n := range nodes {
		nodeTokens[n] = randomToken()
		fmt.Fprintf(&tokens, "%s,system:node:%s,node-%s-uid,\"system:nodes\"\n", nodeTokens[n], n, n)
	}
	tokenFile := filepath.Join(*dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, tokens.Bytes(), 0o600); err != nil {
		return err
	}

	etcd, etcdURL, err := startEtcd(*dir)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	etcdDone := false
	closeEtcd := func() {
		if !etcdDone {
			etcdDone = true
			etcd.Close()
		}
	}
	defer closeEtcd()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// kube-apiserver, as cmd/kube-apiserver/app/testing.StartTestServer starts it.
	s := options.NewServerRunOptions()
	pfs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		pfs.AddFlagSet(f)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	s.SecureServing.Listener, s.SecureServing.BindPort = ln, port
	s.SecureServing.ExternalAddress = net.ParseIP("127.0.0.1")
	apiFlags := []string{
		"--etcd-servers=" + etcdURL,
		"--tls-cert-file=" + filepath.Join(*dir, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(*dir, "apiserver.key"),
		"--cert-dir=" + *dir,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(*dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(*dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/16",
		"--endpoint-reconciler-type=none",
		"--advertise-address=127.0.0.1",
	}
	if *gates != "" {
		apiFlags = append(apiFlags, "--feature-gates="+*gates)
	}
	if *runtimeConfig != "" {
		apiFlags = append(apiFlags, "--runtime-config="+*runtimeConfig)
	}
	if err := pfs.Parse(apiFlags); err != nil {
		return err
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return err
	}
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	completed, err := s.Complete(ctx)
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return errors.Join(errs...)
	}
	apiDone := make(chan error, 1)
	go func() { apiDone <- app.Run(ctx, completed) }()

	server := fmt.Sprintf("https://127.0.0.1:%d", port)
	adminKC := filepath.Join(*dir, "admin.kubeconfig")
	if err := writeKubeconfig(adminKC, server, caPEM, "admin", adminToken); err != nil {
		return err
	}
	for n, tok := range nodeTokens {
		if err := writeKubeconfig(filepath.Join(*dir, "node-"+n+".kubeconfig"), server, caPEM, "system:node:"+n, tok); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKC)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Ready: /readyz ok (every post-start hook, the bootstrap RBAC and
	// priority classes included) and the default namespace there.
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-apiDone:
			return fmt.Errorf("kube-apiserver stopped before it was ready: %v", err)
		default:
		}
		status := 0
		client.CoreV1().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		if status == 200 {
			if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return errors.New("kube-apiserver was not ready within 90 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	apiReady := time.Since(start)

	var wg sync.WaitGroup
	// kube-scheduler with its default profile (DynamicResources is in it),
	// as test/integration/util.StartScheduler runs it.
	schedCfg := schedconfig.KubeSchedulerConfiguration{}
	gvk := kubeschedulerconfigv1.SchemeGroupVersion.WithKind("KubeSchedulerConfiguration")
	if _, _, err := kubeschedulerscheme.Codecs.UniversalDecoder().Decode([]byte(""), &gvk, &schedCfg); err != nil {
		return fmt.Errorf("default scheduler configuration: %w", err)
	}
	if *bindingTimeout != 0 {
		// As a KubeSchedulerConfiguration's pluginConfig sets it.
		set := false
		for _, p := range schedCfg.Profiles {
			for _, pc := range p.PluginConfig {
				if args, ok := pc.Args.(*schedconfig.DynamicResourcesArgs); ok {
					args.BindingTimeout = &metav1.Duration{Duration: *bindingTimeout}
					set = true
				}
			}
		}
		if !set {
			return errors.New("-binding-timeout: the default profile has no DynamicResources arguments")
		}
	}
	schedInformers := schedulerInformers(client)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	sched, err := scheduler.New(ctx, client, schedInformers, nil, profile.NewRecorderFactory(broadcaster),
		scheduler.WithKubeConfig(cfg),
		scheduler.WithProfiles(schedCfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(schedCfg.PercentageOfNodesToScore),
		scheduler.WithPodMaxBackoffSeconds(schedCfg.PodMaxBackoffSeconds),
		scheduler.WithPodInitialBackoffSeconds(schedCfg.PodInitialBackoffSeconds),
		scheduler.WithParallelism(schedCfg.Parallelism),
	)
	if err != nil {
		return fmt.Errorf("kube-scheduler: %w", err)
	}
	schedInformers.Start(ctx.Done())
	if err := synced("kube-scheduler", schedInformers.WaitForCacheSync); err != nil {
		return err
	}
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		return fmt.Errorf("kube-scheduler: %w", err)
	}
	wg.Go(func() { sched.Run(ctx) })

	// The DRA controllers, as kube-controller-manager constructs them.
	ctrlInformers := informers.NewSharedInformerFactory(client, 0)
	claims, err := claimController(client, ctrlInformers)
	if err != nil {
		return fmt.Errorf("resourceclaim controller: %w", err)
	}
	taints := taintEvictionController(client, ctrlInformers)
	// The default ServiceAccount of every namespace and the kube-root-ca.crt
	// ConfigMap, as kube-controller-manager's serviceaccount and
	// root-ca-cert-publisher controllers keep them (pods need the first).
	accounts, err := serviceaccount.NewServiceAccountsController(klog.Background(),
		ctrlInformers.Core().V1().ServiceAccounts(), ctrlInformers.Core().V1().Namespaces(),
		client, serviceaccount.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return fmt.Errorf("serviceaccount controller: %w", err)
	}
	rootCA, err := rootcacertpublisher.NewPublisher(ctrlInformers.Core().V1().ConfigMaps(),
		ctrlInformers.Core().V1().Namespaces(), client, caPEM)
	if err != nil {
		return fmt.Errorf("root-ca-cert-publisher: %w", err)
	}
	ctrlInformers.Start(ctx.Done())
	if err := synced("the controllers", ctrlInformers.WaitForCacheSync); err != nil {
		return err
	}
	wg.Go(func() { accounts.Run(ctx, 1) })
	wg.Go(func() { rootCA.Run(ctx, 1) })
	wg.Go(func() { claims.Run(ctx, 2) })
	wg.Go(func() {
		if err := taints.Run(ctx, 2); err != nil {
			klog.ErrorS(err, "device taint eviction controller stopped")
		}
	})

	for {
		if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the default ServiceAccount was not made within 90 s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	line, _ := json.Marshal(map[string]any{
		"ready": true, "server": server, "kubeconfig": adminKC, "ca": filepath.Join(*dir, "ca.crt"),
		"seconds": time.Since(start).Seconds(), "apiserver_seconds": apiReady.Seconds(), "etcd": etcdURL,
	})
	fmt.Println(string(line))

	var runErr error
	select {
	case sig := <-stop:
		klog.InfoS("stopping", "signal", sig.String())
	case runErr = <-apiDone:
		runErr = fmt.Errorf("kube-apiserver stopped: %v", runErr)
	}
	cancel()
	broadcaster.Shutdown()
	schedInformers.Shutdown()
	ctrlInformers.Shutdown()
	wg.Wait()
	if runErr == nil {
		select {
		case err := <-apiDone:
			if err != nil {
				klog.ErrorS(err, "kube-apiserver shutdown")
			}
		case <-time.After(30 * time.Second):
			runErr = errors.New("kube-apiserver did not stop within 30 s")
		}
	}
	closeEtcd()
	return runErr
}

// synced waits (at most 60 s) for the informers of who to sync; one that
// does not lists an API the server does not serve (GenericWorkload's
// PodGroups need -runtime-config scheduling.k8s.io/v1beta1=true).
func synced(who string, wait func(<-chan struct{}) map[reflect.Type]bool) error {
	stop := make(chan struct{})
	timer := time.AfterFunc(60*time.Second, func() { close(stop) })
	defer timer.Stop()
	var missing []string
	for typ, ok := range wait(stop) {
		if !ok {
			missing = append(missing, typ.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: informers not synced within 60 s: %s (an API the server does not serve? see -runtime-config)", who, strings.Join(missing, ", "))
	}
	return nil
}

func restConfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	cfg.WarningHandler = rest.NoWarnings{}
	return cfg, nil
}

func apply(args []string) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	kc := fs.String("kubeconfig", "", "the kubeconfig")
	dryRun := fs.Bool("dry-run", false, "server-side dry-run (dryRun=All)")
	manager := fs.String("field-manager", "dpctl-test", "the field manager")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := restConfig(*kc)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	failed := 0
	for _, file := range fs.Args() {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(f))
		for {
			doc, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return fmt.Errorf("%s: %w", file, err)
			}
			js, err := yaml.YAMLToJSON(doc)
			if err != nil {
				f.Close()
				return fmt.Errorf("%s: %w", file, err)
			}
			if len(bytes.TrimSpace(js)) == 0 || string(bytes.TrimSpace(js)) == "null" {
				continue
			}
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(js); err != nil {
				f.Close()
				return fmt.Errorf("%s: %w", file, err)
			}
			out := map[string]any{"file": file, "kind": obj.GetKind(), "name": obj.GetName(), "namespace": obj.GetNamespace()}
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				out["code"], out["message"] = 0, err.Error()
				failed++
				emit(out)
				continue
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				ns := obj.GetNamespace()
				if ns == "" {
					ns = "default"
				}
				ri = dyn.Resource(m.Resource).Namespace(ns)
			}
			opts := metav1.PatchOptions{FieldManager: *manager, Force: ptrTo(true)}
			if *dryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			res, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, js, opts)
			if err != nil {
				var st apierrors.APIStatus
				if errors.As(err, &st) {
					s := st.Status()
					out["code"], out["reason"], out["message"] = s.Code, s.Reason, s.Message
				} else {
					out["code"], out["message"] = 0, err.Error()
				}
				failed++
			} else {
				out["code"], out["uid"] = 200, string(res.GetUID())
			}
			emit(out)
		}
		f.Close()
	}
	if failed > 0 {
		return fmt.Errorf("%d object(s) refused", failed)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func token(args []string) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	kc := fs.String("kubeconfig", "", "the (admin) kubeconfig that asks")
	ns := fs.String("namespace", "", "the service account's namespace")
	sa := fs.String("serviceaccount", "", "the service account")
	pod := fs.String("pod", "", "the pod the token is bound to (in the same namespace)")
	out := fs.String("out", "", "where to write the kubeconfig")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := restConfig(*kc)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	p, err := client.CoreV1().Pods(*ns).Get(ctx, *pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	tr, err := client.CoreV1().ServiceAccounts(*ns).CreateToken(ctx, *sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptrTo(int64(3600)),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	raw, err := clientcmd.LoadFromFile(*kc)
	if err != nil {
		return err
	}
	cl := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	user := "system:serviceaccount:" + *ns + ":" + *sa
	if err := writeKubeconfig(*out, cl.Server, cl.CertificateAuthorityData, user, tr.Status.Token); err != nil {
		return err
	}
	emit(map[string]any{"kubeconfig": *out, "user": user, "pod": p.Name, "node": p.Spec.NodeName})
	return nil
}
