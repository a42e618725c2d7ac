// Command devicemetadata reads DRA device metadata files (KEP-5304) with
// upstream's consumer-side decoder, k8s.io/dynamic-resource-allocation/devicemetadata
// (the version pinned in go.mod), as a workload in a container reads them:
//
//	devicemetadata FILE...
//
// For each file one JSON line on stdout: {"file":…,"gvk":…,"validation":…,
// "metadata":…,"v1alpha1":…}. gvk is the version the decoder took (the first
// of the stream it knows), validation the declarative validation's error of
// that object ("" when valid), metadata the object decoded into the internal
// type (metadata.DeviceMetadata, the type upstream recommends consumers
// use), v1alpha1 the same stream decoded for a consumer built for 1.36 (or
// the error it gets). A file it cannot decode is {"file":…,"error":…};
// the exit code is then 1.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	metadatav1alpha1 "k8s.io/dynamic-resource-allocation/api/metadata/v1alpha1"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
)

func emit(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	fmt.Println(string(b))
}

func decode(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var md metadata.DeviceMetadata
	var gvk schema.GroupVersionKind
	var invalid error
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(f), &md,
		devicemetadata.DecodeMetadataWithValidationResult(&invalid),
		devicemetadata.DecodeMetadataStoreGVKResult(&gvk)); err != nil {
		return nil, err
	}
	validation := ""
	if invalid != nil {
		validation = invalid.Error()
	}
	out := map[string]any{"file": path, "gvk": gvk.String(), "validation": validation, "metadata": md}
	if _, err := f.Seek(0, 0); err != nil {
		return nil, err
	}
	var old metadatav1alpha1.DeviceMetadata
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(f), &old); err != nil {
		out["v1alpha1"] = map[string]any{"error": err.Error()}
	} else {
		out["v1alpha1"] = old
	}
	return out, nil
}

func main() {
	code := 0
	for _, path := range os.Args[1:] {
		out, err := decode(path)
		if err != nil {
			emit(map[string]any{"file": path, "error": err.Error()})
			code = 1
			continue
		}
		emit(out)
	}
	os.Exit(code)
}
