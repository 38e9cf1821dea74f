// Package seal encrypts secrets kept at rest (event subscription signing
// secrets, account access tokens) with AES-256-GCM.
//
// A sealed value is text:
//
//	sealed:v1:<key id>:<base64url, unpadded, of nonce || ciphertext || tag>
//
// The key id is the first 8 hex digits of the SHA-256 of the key, so Open
// picks the key directly and an operator can tell which key a value needs
// (printf %s "$KEY" | base64 -d | sha256sum). The nonce is 12 random bytes.
// The additional data is "sealed:v1:<key id>", which binds the format version
// and the key id to the ciphertext.
//
// Keys come from WAMUX_SECRET_KEY: comma-separated base64 of 32 bytes each;
// the first seals, all open, so a key is rotated by putting the next key in
// front and dropping the old one once every value has been sealed again.
// Without WAMUX_SECRET_KEY an embedded deployment keeps one generated key in
// a file (LoadOrCreateKeyFile).
package seal
