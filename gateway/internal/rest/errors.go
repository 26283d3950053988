package rest

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func fieldErrors(path, value, detail string) field.ErrorList {
	return field.ErrorList{field.Invalid(field.NewPath(path), value, detail)}
}
