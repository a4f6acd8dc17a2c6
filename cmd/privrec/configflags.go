package main

import (
	"flag"
	"fmt"
	"reflect"
	"strings"
)

// bindConfig registers one flag per tagged field of the struct cfg points
// to (embedded structs included): the flag name is the field's `flag` tag,
// its help the `help` tag, its default the field's current value. Parsing
// the flag set writes straight into the struct. It is the one place where
// a method's typed Config meets the command line.
func bindConfig(fs *flag.FlagSet, cfg any) error {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config %T is not a pointer to a struct", cfg)
	}
	return bindStruct(fs, v.Elem())
}

func bindStruct(fs *flag.FlagSet, v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		fv := v.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if err := bindStruct(fs, fv); err != nil {
				return err
			}
			continue
		}
		name := f.Tag.Get("flag")
		if name == "" || !f.IsExported() {
			continue
		}
		help := f.Tag.Get("help")
		if fs.Lookup(name) != nil {
			return fmt.Errorf("flag --%s is defined twice", name)
		}
		switch p := fv.Addr().Interface().(type) {
		case *float64:
			fs.Float64Var(p, name, *p, help)
		case *int:
			fs.IntVar(p, name, *p, help)
		case *uint64:
			fs.Uint64Var(p, name, *p, help)
		case *bool:
			fs.BoolVar(p, name, *p, help)
		case *string:
			fs.StringVar(p, name, *p, help)
		case *[]float64:
			fs.Func(name, help+" (comma-separated numbers)", func(s string) error {
				var out []float64
				for _, part := range strings.Split(s, ",") {
					var x float64
					if _, err := fmt.Sscanf(strings.TrimSpace(part), "%g", &x); err != nil {
						return fmt.Errorf("%q is not a number", part)
					}
					out = append(out, x)
				}
				*p = out
				return nil
			})
		default:
			return fmt.Errorf("config field %s has unsupported type %s", f.Name, f.Type)
		}
	}
	return nil
}

// configNumber returns the value of the field of cfg (a pointer to a
// struct, embedded structs included) whose flag tag is name, when it is a
// number or a one-element list of numbers.
func configNumber(cfg any, name string) (float64, bool) {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return 0, false
	}
	return structNumber(v.Elem(), name)
}

func structNumber(v reflect.Value, name string) (float64, bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if x, ok := structNumber(v.Field(i), name); ok {
				return x, true
			}
			continue
		}
		if f.Tag.Get("flag") != name || !f.IsExported() {
			continue
		}
		switch x := v.Field(i).Interface().(type) {
		case float64:
			return x, true
		case []float64:
			if len(x) == 1 {
				return x[0], true
			}
		}
		return 0, false
	}
	return 0, false
}
