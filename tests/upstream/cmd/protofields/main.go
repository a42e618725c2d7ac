// Command protofields prints the wire shape of every kubelet plugin API
// dpctl serves or calls, read from upstream's generated Go types (their
// protoreflect descriptors), one line per message, field, enum value and
// RPC, sorted. dpctl's test (src/api.rs, the_protos_match_upstream) prints
// the same lines from its own descriptors and compares them, so a field
// upstream adds or renumbers shows up as a failing comparison.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	deviceplugin "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drav1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drav1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	pluginregistration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"
	pods "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

func kind(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return fmt.Sprintf("map<%s,%s>", kind(f.MapKey()), kind(f.MapValue()))
	case f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind:
		return "." + string(f.Message().FullName())
	case f.Kind() == protoreflect.EnumKind:
		return "." + string(f.Enum().FullName())
	}
	return f.Kind().String()
}

func label(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return "map"
	case f.IsList():
		return "repeated"
	case f.HasOptionalKeyword():
		return "optional"
	}
	return "singular"
}

func messages(out *[]string, ms protoreflect.MessageDescriptors) {
	for i := 0; i < ms.Len(); i++ {
		m := ms.Get(i)
		if m.IsMapEntry() {
			continue
		}
		*out = append(*out, fmt.Sprintf("message %s", m.FullName()))
		fs := m.Fields()
		for j := 0; j < fs.Len(); j++ {
			f := fs.Get(j)
			*out = append(*out, fmt.Sprintf("field %s.%s %d %s %s json=%s", m.FullName(), f.Name(), f.Number(), kind(f), label(f), f.JSONName()))
		}
		enums(out, m.Enums())
		messages(out, m.Messages())
	}
}

func enums(out *[]string, es protoreflect.EnumDescriptors) {
	for i := 0; i < es.Len(); i++ {
		e := es.Get(i)
		*out = append(*out, fmt.Sprintf("enum %s", e.FullName()))
		vs := e.Values()
		for j := 0; j < vs.Len(); j++ {
			*out = append(*out, fmt.Sprintf("value %s.%s %d", e.FullName(), vs.Get(j).Name(), vs.Get(j).Number()))
		}
	}
}

func main() {
	files := []protoreflect.FileDescriptor{
		deviceplugin.File_staging_src_k8s_io_kubelet_pkg_apis_deviceplugin_v1beta1_api_proto,
		pluginregistration.File_staging_src_k8s_io_kubelet_pkg_apis_pluginregistration_v1_api_proto,
		podresources.File_staging_src_k8s_io_kubelet_pkg_apis_podresources_v1_api_proto,
		drav1.File_staging_src_k8s_io_kubelet_pkg_apis_dra_v1_api_proto,
		drav1beta1.File_staging_src_k8s_io_kubelet_pkg_apis_dra_v1beta1_api_proto,
		drahealthv1alpha1.File_staging_src_k8s_io_kubelet_pkg_apis_dra_health_v1alpha1_api_proto,
		drahealthv1.File_staging_src_k8s_io_kubelet_pkg_apis_dra_health_v1_api_proto,
		pods.File_staging_src_k8s_io_kubelet_pkg_apis_pods_v1alpha1_api_proto,
	}
	var out []string
	for _, fd := range files {
		out = append(out, fmt.Sprintf("file %s %s", fd.Package(), fd.Syntax()))
		messages(&out, fd.Messages())
		enums(&out, fd.Enums())
		ss := fd.Services()
		for i := 0; i < ss.Len(); i++ {
			s := ss.Get(i)
			out = append(out, fmt.Sprintf("service %s", s.FullName()))
			ms := s.Methods()
			for j := 0; j < ms.Len(); j++ {
				m := ms.Get(j)
				out = append(out, fmt.Sprintf("rpc %s.%s .%s .%s client_streaming=%t server_streaming=%t", s.FullName(), m.Name(), m.Input().FullName(), m.Output().FullName(), m.IsStreamingClient(), m.IsStreamingServer()))
			}
		}
	}
	sort.Strings(out)
	if _, err := os.Stdout.WriteString(strings.Join(out, "\n") + "\n"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
