package sim

import "unicode/utf8"

// decodeTextFast decodes the common case — a text message in the plain
// shape every client sends — without reflection. It handles only what it
// can decode exactly as encoding/json would: known lowercase keys, each
// once, strings without escapes, and a text object of body and
// preview_url. For anything else it reports false and the caller falls
// back to encoding/json; a fuzz target checks both agree.
func decodeTextFast(b []byte) (*sendRequest, bool) {
	p := fastParser{b: b}
	r := &sendRequest{}
	var seen uint8
	ok := p.object(func(key string) bool {
		var bit uint8
		switch key {
		case "messaging_product":
			bit = 1
			s, ok := p.str()
			r.MessagingProduct = &s
			if !ok {
				return false
			}
		case "recipient_type":
			bit = 2
			s, ok := p.str()
			r.RecipientType = s
			if !ok {
				return false
			}
		case "to":
			bit = 4
			s, ok := p.str()
			r.To = s
			if !ok {
				return false
			}
		case "type":
			bit = 8
			s, ok := p.str()
			r.Type = s
			if !ok {
				return false
			}
		case "biz_opaque_callback_data":
			bit = 16
			s, ok := p.str()
			r.BizOpaqueCallbackData = s
			if !ok {
				return false
			}
		case "text":
			bit = 32
			t, ok := p.text()
			r.Text = t
			if !ok {
				return false
			}
		default:
			return false
		}
		if seen&bit != 0 {
			return false // duplicate key: leave last-wins to encoding/json
		}
		seen |= bit
		return true
	})
	if !ok {
		return nil, false
	}
	p.ws()
	return r, p.i == len(p.b)
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) consume(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object parses {"key": value, ...}, calling field for each key with the
// position at its value. Empty objects are left to encoding/json.
func (p *fastParser) object(field func(key string) bool) bool {
	if !p.consume('{') {
		return false
	}
	for {
		key, ok := p.str()
		if !ok || !p.consume(':') || !field(key) {
			return false
		}
		if p.consume(',') {
			continue
		}
		return p.consume('}')
	}
}

// str parses a string without escapes or control characters, in valid
// UTF-8: exactly the strings encoding/json returns byte for byte.
func (p *fastParser) str() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *fastParser) boolean() (bool, bool) {
	p.ws()
	rest := p.b[p.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		p.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

func (p *fastParser) text() (*textObject, bool) {
	t := &textObject{}
	var seen uint8
	ok := p.object(func(key string) bool {
		switch key {
		case "body":
			if seen&1 != 0 {
				return false
			}
			seen |= 1
			s, ok := p.str()
			t.Body = &s
			return ok
		case "preview_url":
			if seen&2 != 0 {
				return false
			}
			seen |= 2
			v, ok := p.boolean()
			t.PreviewURL = &v
			return ok
		}
		return false
	})
	return t, ok
}
