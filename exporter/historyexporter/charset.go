// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package historyexporter

import (
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// maxKnownCharacters bounds the characters a multibyte charset remembers
// (each look-up is an encoder call; a sender chooses the characters).
const maxKnownCharacters = 1 << 16

// charset is what the history database's encoding (its server_encoding)
// holds. The connection sends UTF-8 (client_encoding) and the server
// converts it: a character it cannot hold would refuse the whole row, or,
// without client_encoding, be stored as other characters. So such a
// character is sent as '?' instead, counted.
type charset struct {
	name string
	// holds tells whether a character beyond ASCII (which every server
	// encoding holds) converts; nil: every character does.
	holds func(rune) bool
}

// charsetOf is the charset of a server encoding, as PostgreSQL names it.
// An encoding without a table here keeps ASCII only: '?' and counted,
// never a refused row.
func charsetOf(serverEncoding string) *charset {
	c := &charset{name: serverEncoding}
	switch serverEncoding {
	case "UTF8", "SQL_ASCII", "":
		// SQL_ASCII stores the bytes as sent; a server that does not say
		// (every supported one does) is left to convert as before.
	case "EUC_CN":
		// GB 2312 as EUC: both bytes from 0xA1 (GBK adds the others).
		c.holds = multibyte(simplifiedchinese.GBK, twoHighBytes)
	case "EUC_KR":
		// KS X 1001 as EUC: both bytes from 0xA1 (the encoder is CP949's).
		c.holds = multibyte(korean.EUCKR, twoHighBytes)
	case "EUC_JP":
		c.holds = multibyte(japanese.EUCJP, func([]byte) bool { return true })
	default:
		if cm, ok := singleByte[serverEncoding]; ok {
			c.holds = func(r rune) bool { _, ok := cm.EncodeRune(r); return ok }
		} else {
			c.holds = func(rune) bool { return false }
		}
	}
	return c
}

// singleByte are the single-byte server encodings by PostgreSQL's names.
var singleByte = map[string]*charmap.Charmap{
	"LATIN1": charmap.ISO8859_1, "LATIN2": charmap.ISO8859_2, "LATIN3": charmap.ISO8859_3, "LATIN4": charmap.ISO8859_4,
	"LATIN5": charmap.ISO8859_9, "LATIN6": charmap.ISO8859_10, "LATIN7": charmap.ISO8859_13, "LATIN8": charmap.ISO8859_14,
	"LATIN9": charmap.ISO8859_15, "LATIN10": charmap.ISO8859_16,
	"ISO_8859_5": charmap.ISO8859_5, "ISO_8859_6": charmap.ISO8859_6, "ISO_8859_7": charmap.ISO8859_7, "ISO_8859_8": charmap.ISO8859_8,
	"WIN866": charmap.CodePage866, "WIN874": charmap.Windows874, "KOI8R": charmap.KOI8R, "KOI8U": charmap.KOI8U,
	"WIN1250": charmap.Windows1250, "WIN1251": charmap.Windows1251, "WIN1252": charmap.Windows1252, "WIN1253": charmap.Windows1253,
	"WIN1254": charmap.Windows1254, "WIN1255": charmap.Windows1255, "WIN1256": charmap.Windows1256, "WIN1257": charmap.Windows1257,
	"WIN1258": charmap.Windows1258,
}

func twoHighBytes(b []byte) bool { return len(b) == 2 && b[0] >= 0xA1 && b[1] >= 0xA1 }

// multibyte holds a character when enc encodes it as bytes that ok
// accepts, remembering up to maxKnownCharacters answers. Only the writer
// goroutine uses it.
func multibyte(enc encoding.Encoding, ok func([]byte) bool) func(rune) bool {
	known := map[rune]bool{}
	return func(r rune) bool {
		if v, seen := known[r]; seen {
			return v
		}
		b, err := enc.NewEncoder().Bytes(utf8.AppendRune(nil, r))
		v := err == nil && ok(b)
		if len(known) < maxKnownCharacters {
			known[r] = v
		}
		return v
	}
}

// fit returns text (UTF-8) with every character c does not hold as '?',
// and how many were; text itself when there are none.
func (c *charset) fit(text []byte) ([]byte, int64) {
	if c == nil || c.holds == nil {
		return text, 0
	}
	var out []byte
	var replaced int64
	done := 0
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(text[i:])
		if r != utf8.RuneError && c.holds(r) {
			i += size
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(text))
		}
		out = append(append(out, text[done:i]...), '?')
		replaced++
		i += size
		done = i
	}
	if out == nil {
		return text, 0
	}
	return append(out, text[done:]...), replaced
}
