package vault

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hutchsandbox/hutch/internal/errdefs"
)

func TestParseEnv(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"empty", "", map[string]string{}},
		{"one", "A=1\n", map[string]string{"A": "1"}},
		{"no_final_newline", "A=1", map[string]string{"A": "1"}},
		{"blank_and_comments", "\n  \n# c=1\n   # indented\nA=1\n\t\n", map[string]string{"A": "1"}},
		{"value_after_first_equals", "A=b=c==", map[string]string{"A": "b=c=="}},
		{"no_inline_comment", "A=x # not a comment", map[string]string{"A": "x # not a comment"}},
		{"dollar_literal", "A=$HOME/${B}", map[string]string{"A": "$HOME/${B}"}},
		{"empty_value", "A=", map[string]string{"A": ""}},
		{"double_quotes_stripped", `A="x y"`, map[string]string{"A": "x y"}},
		{"single_quotes_stripped", `A='x "y"'`, map[string]string{"A": `x "y"`}},
		{"only_one_pair_stripped", `A=""x""`, map[string]string{"A": `"x"`}},
		{"mismatched_quotes_kept", `A="x'`, map[string]string{"A": `"x'`}},
		{"lone_quote_kept", `A="`, map[string]string{"A": `"`}},
		{"empty_quotes", `A=""`, map[string]string{"A": ""}},
		{"spaces_kept_in_value", "A= x ", map[string]string{"A": " x "}},
		{"spaces_around_name", "  A =1", map[string]string{"A": "1"}},
		{"crlf", "A=1\r\nB=2\r\n", map[string]string{"A": "1", "B": "2"}},
		{"last_wins", "A=1\nA=2", map[string]string{"A": "2"}},
		{"underscore_names", "_=1\n_a9=2", map[string]string{"_": "1", "_a9": "2"}},
		{"hash_in_value", "A=#x", map[string]string{"A": "#x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnv([]byte(tc.in))
			if err != nil {
				t.Fatalf("ParseEnv: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseEnv_Errors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"no_equals", "A=1\nloose-token\n", "line 2: expected NAME=VALUE"},
		{"digit_first", "1A=x", `line 1: invalid variable name "1A"`},
		{"dash_in_name", "\n\nMY-VAR=x", `line 3: invalid variable name "MY-VAR"`},
		{"empty_name", "=x", `line 1: invalid variable name ""`},
		{"space_in_name", "export A=x", `line 1: invalid variable name "export A"`},
		{"lone_cr_in_value", "A=x\ry", `line 1: value of variable "A" contains a carriage return or NUL`},
		{"double_cr", "A=x\r\r\n", `line 1: value of variable "A" contains a carriage return or NUL`},
		{"nul_in_value", "A=x\x00y", `line 1: value of variable "A" contains a carriage return or NUL`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEnv([]byte(tc.in))
			if err == nil {
				t.Fatalf("ParseEnv(%q) = nil error, want %q", tc.in, tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("ParseEnv(%q) got %q, want %q", tc.in, err, tc.wantErr)
			}
			if !errdefs.IsInvalid(err) {
				t.Errorf("ParseEnv(%q) error is not ErrInvalid", tc.in)
			}
		})
	}
}

func TestFormatEnv(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]string
		want string
	}{
		{"nil", nil, ""},
		{"sorted", map[string]string{"B": "2", "A": "1", "_": "3"}, "A=1\nB=2\n_=3\n"},
		{"empty_value", map[string]string{"A": ""}, "A=\n"},
		{"double_quoted_wrapped_in_single", map[string]string{"A": `"x"`}, `A='"x"'` + "\n"},
		{"single_quoted_wrapped_in_double", map[string]string{"A": `'x'`}, `A="'x'"` + "\n"},
		{"two_double_quotes", map[string]string{"A": `""`}, `A='""'` + "\n"},
		{"mismatched_left_alone", map[string]string{"A": `"x'`}, `A="x'` + "\n"},
		{"lone_quote_left_alone", map[string]string{"A": `'`}, "A='\n"},
		{"dollar_and_hash", map[string]string{"A": "$X #y"}, "A=$X #y\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FormatEnv(tc.in)
			if err != nil {
				t.Fatalf("FormatEnv: %v", err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("FormatEnv (-want +got):\n%s", diff)
			}
			back, err := ParseEnv(got)
			if err != nil {
				t.Fatalf("ParseEnv(FormatEnv): %v", err)
			}
			want := tc.in
			if want == nil {
				want = map[string]string{}
			}
			if diff := cmp.Diff(want, back); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatEnv_Errors(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]string
		wantErr string
	}{
		{"bad_name", map[string]string{"A": "1", "B-C": "2"}, `invalid variable name "B-C"`},
		{"newline", map[string]string{"A": "x\ny"}, `value of variable "A" contains a newline, carriage return or NUL`},
		{"cr", map[string]string{"A": "x\r"}, `value of variable "A" contains a newline, carriage return or NUL`},
		{"nul", map[string]string{"A": "\x00"}, `value of variable "A" contains a newline, carriage return or NUL`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FormatEnv(tc.in)
			if err == nil {
				t.Fatalf("FormatEnv = nil error, want %q", tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("FormatEnv got %q, want %q", err, tc.wantErr)
			}
			if !errdefs.IsInvalid(err) {
				t.Error("FormatEnv error is not ErrInvalid")
			}
		})
	}
}

func TestValidateEnvName(t *testing.T) {
	for _, name := range []string{"A", "_", "a_B9", "GH_TOKEN", "env"} {
		if err := ValidateEnvName(name); err != nil {
			t.Errorf("ValidateEnvName(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "9A", "A-B", "A B", "A.B", "Ä", "A\x00"} {
		if err := ValidateEnvName(name); !errdefs.IsInvalid(err) {
			t.Errorf("ValidateEnvName(%q) = %v, want ErrInvalid", name, err)
		}
	}
}

func FuzzParseEnv(f *testing.F) {
	for _, seed := range []string{
		"", "A=1\n", "A=\"x\"\r\nB='y'", "#c\n  \nA=b=c", `A='"x"'`, `A=""""`,
		"A=\r", "1=2", "A", "A=\x00", " A = \"", "A=\"\n", "\xff=1", "A=\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := ParseEnv(data)
		if err != nil {
			return
		}
		out, err := FormatEnv(vars)
		if err != nil {
			t.Fatalf("FormatEnv of a parsed map: %v", err)
		}
		back, err := ParseEnv(out)
		if err != nil {
			t.Fatalf("ParseEnv of formatted %q: %v", out, err)
		}
		if diff := cmp.Diff(vars, back); diff != "" {
			t.Fatalf("round trip (-parsed +reparsed):\n%s", diff)
		}
	})
}

func FuzzFormatEnv(f *testing.F) {
	f.Add("A", "1", "B", "2")
	f.Add("A", `"x"`, "B", `'y'`)
	f.Add("A", "", "A", "x")
	f.Add("A", "x\ny", "1B", "z")
	f.Add("_", `'`, "C", ` "q" `)
	f.Fuzz(func(t *testing.T, name1, value1, name2, value2 string) {
		vars := map[string]string{name1: value1, name2: value2}
		out, err := FormatEnv(vars)
		if err != nil {
			// The only texts FormatEnv may produce name a variable; any
			// other text could be carrying a value.
			var allowed []string
			for _, n := range []string{name1, name2} {
				allowed = append(allowed,
					fmt.Sprintf("invalid variable name %q", n),
					fmt.Sprintf("value of variable %q contains a newline, carriage return or NUL", n))
			}
			if !slices.Contains(allowed, err.Error()) {
				t.Fatalf("FormatEnv error %q is not one of the texts naming a variable", err)
			}
			return
		}
		back, err := ParseEnv(out)
		if err != nil {
			t.Fatalf("ParseEnv of formatted %q: %v", out, err)
		}
		if diff := cmp.Diff(vars, back); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}
