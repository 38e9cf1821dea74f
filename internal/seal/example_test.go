package seal_test

import (
	"fmt"

	"github.com/wamux/wamux/internal/seal"
)

func ExampleFromEnvOrFile() {
	env := "QW4gZXhhbXBsZSBrZXksIG5ldmVyIHVzZSBpdC4uISE=" // a fixed example key: generate real ones with openssl rand -base64 32
	k, err := seal.FromEnvOrFile(env, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	sealed, err := k.Seal("whsec_c2VjcmV0")
	if err != nil {
		fmt.Println(err)
		return
	}
	plain, err := k.Open(sealed)
	fmt.Println(seal.IsSealed(sealed), plain, err, k)
	// Output: true whsec_c2VjcmV0 <nil> seal.Keyring{keys:1}
}
