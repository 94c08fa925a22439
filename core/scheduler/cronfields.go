package scheduler

import (
	"fmt"
	"strconv"
	"strings"
)

// cronField is one field of a five-field cron expression.
type cronField struct {
	name     string
	min, max int
	names    map[string]int
}

var cronFields = [5]cronField{
	{"minute", 0, 59, nil},
	{"hour", 0, 23, nil},
	{"day-of-month", 1, 31, nil},
	{"month", 1, 12, map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}},
	// 7 is Sunday too, as in Vixie cron and cronie (robfig refuses it:
	// sundayAsZero rewrites it before robfig parses the expression).
	{"day-of-week", 0, 7, map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}},
}

// sundayAsZero rewrites a checked expression's day-of-week items that
// name 7 (Sunday) for robfig, whose range is 0-6: "7" becomes "0", and an
// item reaching 7 ("5-7", "1-7/2") becomes the list of days it means.
func sundayAsZero(e string) string {
	fields := strings.Fields(e)
	if len(fields) != 5 || !strings.Contains(fields[4], "7") {
		return e
	}
	dow := cronFields[4]
	parts := strings.Split(fields[4], ",")
	for i, part := range parts {
		rng, step, _ := strings.Cut(part, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		a, errA := dow.value(lo)
		b, errB := a, error(nil)
		if isRange {
			b, errB = dow.value(hi)
		}
		if rng == "*" || rng == "?" || errA != nil || errB != nil || b != 7 {
			continue
		}
		by := 1
		if step != "" {
			by, _ = strconv.Atoi(step)
		}
		var days []string
		for d := a; d <= b; d += by {
			days = append(days, strconv.Itoa(d%7))
		}
		parts[i] = strings.Join(days, ",")
	}
	fields[4] = strings.Join(parts, ",")
	return strings.Join(fields, " ")
}

// checkCronFields validates e field by field with robfig's grammar
// (list of number | name | * | ?, ranges a-b, steps /n) so that an error
// names the field and the token; robfig's own messages name neither.
func checkCronFields(e string) error {
	fields := strings.Fields(e)
	if len(fields) != 5 {
		return fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week), got %d", len(fields))
	}
	for i, f := range fields {
		if err := cronFields[i].check(f); err != nil {
			return fmt.Errorf("%s field: %w", cronFields[i].name, err)
		}
	}
	return nil
}

func (c cronField) check(field string) error {
	for _, part := range strings.Split(field, ",") {
		if part == "" {
			return fmt.Errorf("empty list item in %q", field)
		}
		rng, step, hasStep := strings.Cut(part, "/")
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || strings.ContainsAny(step, "+-") {
				return fmt.Errorf("bad step %q in %q", step, part)
			}
			if n <= 0 {
				return fmt.Errorf("step %d in %q must be > 0", n, part)
			}
		}
		if rng == "*" || rng == "?" {
			continue
		}
		lo, hi, isRange := strings.Cut(rng, "-")
		a, err := c.value(lo)
		if err != nil {
			return err
		}
		if !isRange {
			continue
		}
		b, err := c.value(hi)
		if err != nil {
			return err
		}
		if a > b {
			return fmt.Errorf("range %q runs backwards", rng)
		}
	}
	return nil
}

// value reads one number or name and checks its range.
func (c cronField) value(tok string) (int, error) {
	if n, ok := c.names[strings.ToLower(tok)]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(tok)
	if err != nil || strings.ContainsAny(tok, "+-") {
		return 0, fmt.Errorf("bad token %q", tok)
	}
	if n < c.min || n > c.max {
		return 0, fmt.Errorf("%d out of range %d-%d", n, c.min, c.max)
	}
	return n, nil
}
