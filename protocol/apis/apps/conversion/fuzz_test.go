package conversion

import (
	"encoding/json"
	"math/rand"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"
)

// fuzzRounds is how many random objects each direction of each kind's
// round trip tries: 120 by default (about 75 s for all kinds under -race
// at 300), more with SHOAL_FUZZ_ROUNDS for a deeper run. Every run draws a
// new seed, so CI runs add up.
var fuzzRounds = func() int {
	if n, err := strconv.Atoi(os.Getenv("SHOAL_FUZZ_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 120
}()

// pick returns one of values, chosen by c: random enum values that the
// CRD schema admits (an enum's other strings never reach a conversion).
func pick[T any](c randfill.Continue, values ...T) T {
	return values[c.Intn(len(values))]
}

// commonFuncs fill the types whose random values the JSON form cannot
// carry unchanged.
func commonFuncs(runtimeserializer serializer.CodecFactory) []any {
	return []any{
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
		},
		func(t *metav1.Time, c randfill.Continue) {
			*t = metav1.NewTime(time.Unix(c.Int63n(1<<31), 0).UTC())
		},
		func(e *runtime.RawExtension, c randfill.Continue) {
			e.Raw = nil
			if c.Bool() {
				e.Raw = []byte(`{"k":"v"}`)
			}
		},
	}
}

// filler returns a randfill filler for apps.kruise.io objects, with the
// kind's own fill functions (extra) last, so that they win.
func filler(seed int64, extra ...any) *randfill.Filler {
	codecs := serializer.NewCodecFactory(runtime.NewScheme())
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, commonFuncs, func(serializer.CodecFactory) []any { return extra })
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), codecs)
}

// clearTypeMeta zeroes the TypeMeta of a typed object (conversions leave
// it to the caller; Convert sets it).
func clearTypeMeta(obj any) {
	v := reflect.ValueOf(obj).Elem().FieldByName("TypeMeta")
	if v.IsValid() {
		v.Set(reflect.Zero(v.Type()))
	}
}

// roundTrip checks a kind's conversion both ways for random objects:
// v1alpha1 -> v1beta1 -> v1alpha1 and v1beta1 -> v1alpha1 -> v1beta1 each
// give the object they started from. extra are the kind's fill functions
// (enums, say). It also runs the same objects through Convert, the
// webhook's JSON path.
func roundTrip[A, B any](t *testing.T, kind string, up func(*A, *B) error, down func(*B, *A) error, extra ...any) {
	t.Helper()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := filler(seed, extra...)
	for i := range fuzzRounds {
		var a A
		f.Fill(&a)
		clearTypeMeta(&a)
		checkRoundTrip(t, i, "v1alpha1", &a, up, down)
		checkJSONRoundTrip(t, i, kind, Alpha.String(), Beta.String(), &a)

		var b B
		f.Fill(&b)
		clearTypeMeta(&b)
		checkRoundTrip(t, i, "v1beta1", &b, down, up)
		checkJSONRoundTrip(t, i, kind, Beta.String(), Alpha.String(), &b)
	}
}

// checkRoundTrip converts in there (to) and back (back) and compares.
func checkRoundTrip[S, D any](t *testing.T, i int, version string, in *S, to func(*S, *D) error, back func(*D, *S) error) {
	t.Helper()
	before, err := json.Marshal(in)
	require.NoError(t, err)
	var mid D
	require.NoError(t, to(in, &mid), "round %d: convert a %s object", i, version)
	after, err := json.Marshal(in)
	require.NoError(t, err)
	require.JSONEq(t, string(before), string(after), "round %d: converting changed the source object", i)
	var out S
	require.NoError(t, back(&mid, &out), "round %d: convert back to %s", i, version)
	if !apiequality.Semantic.DeepEqual(in, &out) {
		// The diff of the two, as testify shows it.
		require.Equal(t, in, &out, "round %d: %s -> other version -> %s lost something", i, version, version)
	}
}

// checkJSONRoundTrip runs a typed object through Convert there and back
// and compares the JSON.
func checkJSONRoundTrip(t *testing.T, i int, kind, from, to string, in any) {
	t.Helper()
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(withTypeMeta(t, raw, from, kind)))
	there, err := Convert(u, to)
	require.NoError(t, err, "round %d: Convert to %s", i, to)
	require.Equal(t, to, there.GetAPIVersion())
	back, err := Convert(there, from)
	require.NoError(t, err, "round %d: Convert back to %s", i, from)
	want, err := u.MarshalJSON()
	require.NoError(t, err)
	got, err := back.MarshalJSON()
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got), "round %d: %s -> %s -> %s through Convert", i, from, to, from)
}

// withTypeMeta sets apiVersion and kind on a JSON object.
func withTypeMeta(t *testing.T, raw []byte, apiVersion, kind string) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	m["apiVersion"], m["kind"] = apiVersion, kind
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}
