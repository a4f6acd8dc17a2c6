package main

import (
	"fmt"
	"strconv"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/synth"
)

// The demo's population is a film-streaming service: synth.Implicit's
// genres become film genres and each item gets an invented title from
// its genre, so a list reads like one. The catalogue (IDs, titles,
// genres) is declared public, as a real service's catalogue is; the
// titles are a function of an item's genre and its rank in it only.

// demoGenres are the genres' names; the population has as many genres.
var demoGenres = []string{"comedy", "drama", "thriller", "sci-fi", "romance", "horror", "documentary", "animation",
	"western", "crime", "fantasy", "musical", "war", "family", "mystery", "adventure"}

// demoNouns are each genre's title nouns (same order as demoGenres).
var demoNouns = [][]string{
	{"Wedding", "Roommate", "Holiday", "Neighbour", "Road Trip", "Reunion", "Substitute", "Bachelor", "Intern", "Caterer", "Mix-Up", "Prank"},
	{"Harbour", "Letter", "Inheritance", "Winter", "Promise", "Orchard", "Daughter", "Verdict", "Lighthouse", "Sister", "Bridge", "Silence"},
	{"Witness", "Protocol", "Deadline", "Stranger", "Cipher", "Alibi", "Ransom", "Pursuit", "Informant", "Signal", "Target", "Safehouse"},
	{"Orbit", "Colony", "Nebula", "Android", "Frontier", "Reactor", "Starship", "Horizon", "Relay", "Singularity", "Outpost", "Eclipse"},
	{"Summer", "Proposal", "Waltz", "Postcard", "Sweetheart", "Vineyard", "Serenade", "Rendezvous", "Honeymoon", "Valentine", "Garden", "Kiss"},
	{"Cellar", "Ritual", "Asylum", "Doll", "Curse", "Haunting", "Attic", "Swamp", "Séance", "Hollow", "Mask", "Crypt"},
	{"Glacier", "Reef", "Election", "Kitchen", "Migration", "Orchestra", "Factory", "Summit", "Archive", "Harvest", "Expedition", "Tide"},
	{"Dragon", "Robot", "Penguin", "Lantern", "Kingdom", "Balloon", "Fox", "Toymaker", "Island", "Kite", "Snowman", "Caravan"},
	{"Outlaw", "Sheriff", "Canyon", "Stagecoach", "Ranch", "Gunslinger", "Prospector", "Posse", "Mesa", "Saloon", "Trail", "Bounty"},
	{"Heist", "Syndicate", "Detective", "Racket", "Getaway", "Precinct", "Ledger", "Smuggler", "Confession", "Docks", "Fixer", "Score"},
	{"Sorcerer", "Crown", "Labyrinth", "Sword", "Oracle", "Realm", "Griffin", "Enchantress", "Tower", "Amulet", "Prophecy", "Forest"},
	{"Showboat", "Chorus", "Ballroom", "Jukebox", "Encore", "Cabaret", "Melody", "Rhapsody", "Bandstand", "Tango", "Overture", "Marquee"},
	{"Regiment", "Trench", "Convoy", "Armistice", "Battalion", "Beachhead", "Garrison", "Airfield", "Resistance", "Front", "Sniper", "Blockade"},
	{"Puppy", "Treehouse", "Summer Camp", "Grandpa", "Pony", "Science Fair", "Sleepover", "Babysitter", "Pet Shop", "Lemonade Stand", "Field Trip", "Snow Day"},
	{"Manor", "Locket", "Riddle", "Diary", "Portrait", "Inspector", "Clue", "Heirloom", "Clocktower", "Vanishing", "Key", "Masquerade"},
	{"Jungle", "Treasure", "Voyage", "Temple", "Raft", "Compass", "Volcano", "Caravel", "Map", "Lost City", "Gorge", "Rapids"},
}

var demoAdjectives = []string{"Last", "Silent", "Hidden", "Golden", "Long", "Distant", "Burning", "Quiet",
	"Second", "Crimson", "Endless", "Little", "Midnight", "Broken", "Wild", "Secret"}

// demoTitle is the title of the k-th film (0: its most popular) of genre
// g: "The <adjective> <noun>", the pair distinct for each k below
// adjectives × nouns (the noun cycles with k, the adjective with k/nouns,
// shifted by the noun and the genre so popular titles vary), numbered
// once the combinations run out.
func demoTitle(g, k int) string {
	nouns := demoNouns[g]
	na, nn := len(demoAdjectives), len(nouns)
	n := k % nn
	a := (k/nn + 5*n + 3*g) % na
	t := "The " + demoAdjectives[a] + " " + nouns[n]
	if combos := na * nn; k >= combos {
		t += " " + strconv.Itoa(k/combos+1)
	}
	return t
}

// demoFilms is the catalogue of the population cfg (seed): item j (ID
// j+1, as synth.ImplicitMatrix names it) titled "The Silent Orbit
// (sci-fi)" after its genre. It returns the catalogue and each item's
// genre.
func demoFilms(cfg synth.ImplicitConfig, seed uint64) (*model.Catalogue, []int32, error) {
	if cfg.Rank != len(demoGenres) {
		return nil, nil, fmt.Errorf("demo: the population has %d genres, the catalogue names %d", cfg.Rank, len(demoGenres))
	}
	genre := cfg.Genres(seed)
	ids := make([]string, cfg.Items)
	titles := make([]string, cfg.Items)
	next := make([]int, cfg.Rank)
	for j, g := range genre {
		ids[j] = strconv.Itoa(j + 1)
		titles[j] = fmt.Sprintf("%s (%s)", demoTitle(int(g), next[g]), demoGenres[g])
		next[g]++
	}
	cat, err := model.NewCatalogue(ids, titles)
	if err != nil {
		return nil, nil, fmt.Errorf("demo catalogue: %w", err)
	}
	return cat, genre, nil
}
