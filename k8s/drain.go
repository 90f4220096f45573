package k8s

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// Drain reads w's events until ctx ends (its error), the server closes
// the watch (nil: resume from the last resourceVersion seen), or an error
// event arrives (onError's result: it classifies a 410). Every other
// event goes to each with its object, which must be unstructured (what
// names the watch in that error); each's error ends the drain.
func Drain(ctx context.Context, w watch.Interface, what string, onError func(error) error,
	each func(watch.EventType, *unstructured.Unstructured) error) error {
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, open = <-w.ResultChan():
		}
		if !open {
			return nil
		}
		if ev.Type == watch.Error {
			return onError(apierrors.FromObject(ev.Object))
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("watching %s: event object %T", what, ev.Object)
		}
		if err := each(ev.Type, u); err != nil {
			return err
		}
	}
}
