// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Every string gpotel-top shows came from a server, and a database user
// chooses many of them (role, database and application names, query
// text, what a backend logs). A terminal obeys control characters, so one
// place cleans them all: cleanAnswers, on the connection, cleans every
// answer and every error of every call before any code measures or draws
// them.

// cleanAnswers is a unary client interceptor: the answer's strings, and the
// error's message, come back as cleanText made them.
func cleanAnswers(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		st := status.Convert(err)
		return status.Error(st.Code(), cleanText(st.Message()))
	}
	if m, ok := reply.(proto.Message); ok {
		cleanMessage(m.ProtoReflect())
	}
	return nil
}

// cleanMessage cleans every string of m and of the messages in it: fields,
// list elements, map keys and values.
func cleanMessage(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			cleanMap(fd, v.Map())
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				switch fd.Kind() {
				case protoreflect.StringKind:
					l.Set(i, protoreflect.ValueOfString(cleanText(l.Get(i).String())))
				case protoreflect.MessageKind, protoreflect.GroupKind:
					cleanMessage(l.Get(i).Message())
				}
			}
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(cleanText(v.String())))
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			cleanMessage(v.Message())
		}
		return true
	})
}

func cleanMap(fd protoreflect.FieldDescriptor, mp protoreflect.Map) {
	type entry struct {
		k protoreflect.MapKey
		v protoreflect.Value
	}
	var renamed []entry
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		switch fd.MapValue().Kind() {
		case protoreflect.StringKind:
			v = protoreflect.ValueOfString(cleanText(v.String()))
			mp.Set(k, v)
		case protoreflect.MessageKind:
			cleanMessage(v.Message())
		}
		if fd.MapKey().Kind() == protoreflect.StringKind {
			if c := cleanText(k.String()); c != k.String() {
				renamed = append(renamed, entry{k, v})
			}
		}
		return true
	})
	for _, e := range renamed {
		mp.Clear(e.k)
		mp.Set(protoreflect.ValueOfString(cleanText(e.k.String())).MapKey(), e.v)
	}
}

// cleanText makes a server's string safe to measure and draw: white space
// (tab, newline, the Unicode line separators) becomes a space; every other
// control character — C0, DEL, C1 (a terminal takes U+009B as CSI) — a
// byte that is not UTF-8, and the bidirectional overrides and isolates
// (which reorder what the screen shows) become "?", as ls prints them.
func cleanText(s string) string {
	if isPlainASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteByte('?')
		case r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029:
			b.WriteByte(' ')
		case r < 0x20 || r >= 0x7f && r <= 0x9f || isBidiControl(r):
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isPlainASCII(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// isBidiControl: the Unicode bidirectional formatting characters.
func isBidiControl(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// oneLine is a cleaned text with its runs of spaces made one, for a
// table cell: a query's indentation would waste the column.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
