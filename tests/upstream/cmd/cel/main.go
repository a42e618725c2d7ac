// Command cel is the CEL oracle of dpctl's differential test
// (tests/differential.rs): each line of stdin is one case (JSON: a selector
// expression and a device); each line of stdout is upstream's answer from
// k8s.io/dynamic-resource-allocation/cel:
//
//   - validation, as kube-apiserver validates a selector of a new object
//     (with the case's DRAListTypeAttributes gate, which adds list-typed
//     attributes and `includes` to the NewExpressions environment)
//     (pkg/apis/resource/validation validateCELExpression): longer than
//     CELSelectorExpressionMaxLength is "tooLong"; a compile error of the
//     NewExpressions environment is "invalid"; an estimated cost above
//     CELSelectorExpressionMaxCost is "cost"; else "ok";
//   - evaluation, as the scheduler's allocator runs a stored selector
//     (StoredExpressions environment, no cost estimate, the runtime cost
//     limit): "true", "false", "compileError" or "runtimeError".
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/dynamic-resource-allocation/cel"
)

type device struct {
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations,omitempty"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes,omitempty"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity,omitempty"`
}

type input struct {
	Expression string `json:"expression"`
	Device     device `json:"device"`
	// ListTypeAttributes: the DRAListTypeAttributes gate (KEP-5491).
	ListTypeAttributes bool `json:"listTypeAttributes,omitempty"`
}

type output struct {
	Validation       string `json:"validation"`
	ValidationDetail string `json:"validationDetail,omitempty"`
	Cost             uint64 `json:"cost,omitempty"`
	Eval             string `json:"eval"`
	EvalDetail       string `json:"evalDetail,omitempty"`
	Error            string `json:"error,omitempty"`
}

// The compilers of both gate settings, made once (cel.GetCompiler keeps
// only the last one).
var compilers = map[bool]interface {
	CompileCELExpression(string, cel.Options) cel.CompilationResult
}{}

func compiler(lists bool) interface {
	CompileCELExpression(string, cel.Options) cel.CompilationResult
} {
	if c, ok := compilers[lists]; ok {
		return c
	}
	c := cel.GetCompiler(cel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: lists})
	compilers[lists] = c
	return c
}

func validate(expr string, lists bool, o *output) {
	if len(expr) > resourceapi.CELSelectorExpressionMaxLength {
		o.Validation = "tooLong"
		o.ValidationDetail = fmt.Sprintf("may not be more than %d bytes", resourceapi.CELSelectorExpressionMaxLength)
		return
	}
	envType := environment.NewExpressions
	r := compiler(lists).CompileCELExpression(expr, cel.Options{EnvType: &envType})
	switch {
	case r.Error != nil:
		o.Validation = "invalid"
		o.ValidationDetail = r.Error.Detail
	case r.MaxCost > resourceapi.CELSelectorExpressionMaxCost:
		o.Validation = "cost"
		o.ValidationDetail = "too complex, exceeds cost limit"
		o.Cost = r.MaxCost
	default:
		o.Validation = "ok"
		o.Cost = r.MaxCost
	}
}

func evaluate(in *input, o *output) {
	r := compiler(in.ListTypeAttributes).CompileCELExpression(in.Expression, cel.Options{DisableCostEstimation: true})
	if r.Error != nil {
		o.Eval = "compileError"
		o.EvalDetail = r.Error.Detail
		return
	}
	d := cel.Device{Driver: in.Device.Driver, AllowMultipleAllocations: in.Device.AllowMultipleAllocations, Attributes: in.Device.Attributes, Capacity: in.Device.Capacity}
	ok, _, err := r.DeviceMatches(context.Background(), d)
	switch {
	case err != nil:
		o.Eval = "runtimeError"
		o.EvalDetail = cel.EnhanceRuntimeError(err).Error()
	case ok:
		o.Eval = "true"
	default:
		o.Eval = "false"
	}
}

func run(line []byte) (o output) {
	defer func() {
		if r := recover(); r != nil {
			o = output{Error: fmt.Sprintf("panic: %v\n%s", r, debug.Stack())}
		}
	}()
	var in input
	if err := json.Unmarshal(line, &in); err != nil {
		return output{Error: "case: " + err.Error()}
	}
	validate(in.Expression, in.ListTypeAttributes, &o)
	evaluate(&in, &o)
	return o
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		if err := enc.Encode(run(in.Bytes())); err != nil {
			fmt.Fprintln(os.Stderr, "cel:", err)
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "cel: stdin:", err)
		os.Exit(1)
	}
}
