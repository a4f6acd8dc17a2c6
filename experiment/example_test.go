package experiment_test

import (
	"fmt"

	"github.com/privrec/privrec/experiment"
)

func ExampleParseConfig() {
	c, err := experiment.ParseConfig([]byte(`{
  "name": "rc-baselines",
  "datasets": [{"name": "small", "source": "lowrank-synthetic", "params": {"users": 50, "items": 30}}],
  "methods": [{"method": "bias"}, {"method": "global-mean", "label": "mean"}],
  "epsilons": [1, 4],
  "metric": "rmse"
}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Name, c.Runs, c.Delta, c.Methods[1].LabelOf())
	// Output: rc-baselines 1 1e-06 mean
}

func ExampleLookupReproduction() {
	r, err := experiment.LookupReproduction("001-fig2c")
	if err != nil {
		fmt.Println(err)
		return
	}
	c, _ := r.Config("quick")
	fmt.Println(c.Name, r.Files())
	// Output: 001-fig2c-quick [ml-1m/ratings.tsv]
}
