// Default examples for each mode (generated from corpora/ samples; edit freely).

export const SAMPLES = {
  "macros": {
    "source": "{{// A preset's main prompt. Comments like this one disappear from the output. }}\nYou are {{char}}, talking with {{user}}. Write {{char}}'s next reply only.\n\n[{{char}}'s description]\n{{description}}\n\n[Personality] {{personality}}\n[Scenario] {{scenario}}\n[{{user}}] {{persona}}\n\nIt is {{weekday}}, {{date}}, {{time}}. The storm has {{getvar::storm_hours}} hours left.\n{{addvar::storm_hours::-1}}{{if {{getvar::storm_hours}}}}After this reply it will have {{getvar::storm_hours}} left.{{else}}The storm is over.{{/if}}\nTonight's mood: {{random::quiet::tense::warm}}. Dice for the lamp: {{roll:1d20}}.\nLast thing {{user}} said: \"{{lastUserMessage}}\"\n{{trim}}\n",
    "inputs": {
      "context": {
        "user": "Ash",
        "persona": "Ash is a courier who missed the last ferry.",
        "chat_id_hash": 424242,
        "seed": 7,
        "now": "2026-11-30T21:15:00Z",
        "chat": [
          {
            "role": "assistant",
            "name": "Mira",
            "content": "In, quickly. The kettle is already on."
          },
          {
            "role": "user",
            "name": "Ash",
            "content": "Thank you. Is the storm going to last?"
          }
        ],
        "variables": {
          "local": {
            "storm_hours": 3
          },
          "global": {}
        }
      },
      "card": {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
          "name": "Mira",
          "description": "{{char}} keeps the lighthouse on Gull Rock. She is patient, dry-humoured and notices everything the sea brings in.",
          "personality": "calm, observant, stubborn about safety",
          "scenario": "A storm has stranded {{user}} on Gull Rock for the night.",
          "first_mes": "*Mira holds the door against the wind.* In, quickly. The kettle is already on.",
          "mes_example": "<START>\n{{user}}: Does the light ever go out?\n{{char}}: Not while I'm breathing.",
          "creator_notes": "A sample card written for tavernbox's README.",
          "system_prompt": "",
          "post_history_instructions": "",
          "alternate_greetings": [
            "*Mira looks up from the logbook.* Another one washed in by the storm?"
          ],
          "tags": [
            "sample"
          ],
          "creator": "tavernbox",
          "character_version": "1.0",
          "extensions": {}
        }
      }
    }
  },
  "ejs": {
    "source": "<%# An EJS template: the inputs' \"variables\" are `variables` here and getvar() reads them %>\nHello <%= variables.user %>, welcome to <%= variables.place %>.\n<% if (getvar('storm_hours') > 2) { %>The storm will last <%= getvar('storm_hours') %> more hours.\n<% } else { %>The storm is easing.\n<% } %>\n<% for (const item of variables.inventory) { -%>\n- <%= item %>\n<% } -%>\n",
    "inputs": {
      "variables": {
        "user": "Ash",
        "place": "Gull Rock",
        "storm_hours": 3,
        "inventory": [
          "lamp oil",
          "rope"
        ]
      }
    }
  },
  "worldinfo": {
    "source": {
      "name": "Gull Rock",
      "entries": {
        "0": {
          "uid": 0,
          "key": [
            "lighthouse",
            "light"
          ],
          "keysecondary": [],
          "comment": "The lighthouse",
          "content": "The Gull Rock light is a hundred years old; its lamp turns on clockwork Mira winds every four hours.",
          "constant": false,
          "selective": false,
          "order": 100,
          "position": 0,
          "disable": false
        },
        "1": {
          "uid": 1,
          "key": [],
          "keysecondary": [],
          "comment": "The island",
          "content": "Gull Rock is a bare island two miles off the coast; the ferry runs only in fair weather.",
          "constant": true,
          "selective": false,
          "order": 90,
          "position": 1,
          "disable": false
        },
        "2": {
          "uid": 2,
          "key": [
            "storm"
          ],
          "keysecondary": [],
          "comment": "Storm lore",
          "content": "Autumn storms here last until the tide turns.",
          "constant": false,
          "selective": false,
          "order": 100,
          "position": 4,
          "depth": 1,
          "role": 0,
          "disable": false
        },
        "3": {
          "uid": 3,
          "key": [
            "dragon"
          ],
          "keysecondary": [],
          "comment": "Sea dragon rumour",
          "content": "Fishermen swear a sea dragon sleeps under the rock.",
          "constant": false,
          "selective": false,
          "order": 100,
          "position": 0,
          "disable": false
        },
        "4": {
          "uid": 4,
          "key": [
            "ferry"
          ],
          "keysecondary": [],
          "comment": "Disabled note",
          "content": "The ferry timetable.",
          "constant": false,
          "selective": false,
          "order": 100,
          "position": 0,
          "disable": true
        }
      }
    },
    "inputs": {
      "chat": [
        "*Mira holds the door against the wind.* In, quickly.",
        "Thank you. Is the storm going to last? I can see the light turning from here."
      ],
      "settings": {
        "world_info_depth": 2,
        "world_info_budget": 25,
        "world_info_recursive": true
      },
      "max_context": 8192
    }
  },
  "assemble": {
    "source": "",
    "inputs": {
      "preset": {
        "name": "tavernbox sample",
        "openai_max_context": 16384,
        "openai_max_tokens": 500,
        "names_behavior": 0,
        "squash_system_messages": false,
        "wi_format": "{0}",
        "scenario_format": "[Scenario: {{scenario}}]",
        "personality_format": "[{{char}}'s personality: {{personality}}]",
        "new_chat_prompt": "[Start a new Chat]",
        "new_example_chat_prompt": "[Example Chat]",
        "continue_nudge_prompt": "[Continue your last message without repeating its original content.]",
        "impersonation_prompt": "[Write your next reply from the point of view of {{user}}, using the chat history so far as a guideline for the writing style of {{user}}. Don't write as {{char}} or system.]",
        "prompts": [
          {
            "identifier": "main",
            "name": "Main Prompt",
            "system_prompt": true,
            "role": "system",
            "content": "Write {{char}}'s next reply in this roleplay with {{user}}. Stay in character; keep replies under 150 words."
          },
          {
            "identifier": "worldInfoBefore",
            "name": "World Info (before)",
            "system_prompt": true,
            "marker": true
          },
          {
            "identifier": "personaDescription",
            "name": "Persona Description",
            "system_prompt": true,
            "marker": true
          },
          {
            "identifier": "charDescription",
            "name": "Char Description",
            "system_prompt": true,
            "marker": true
          },
          {
            "identifier": "charPersonality",
            "name": "Char Personality",
            "system_prompt": true,
            "marker": true
          },
          {
            "identifier": "scenario",
            "name": "Scenario",
            "system_prompt": true,
            "marker": true
          },
          {
            "identifier": "worldInfoAfter",
            "name": "World Info (after)",
            "system_prompt": true,
            "marker": true
          },
          {
            "identifier": "dialogueExamples",
            "name": "Chat Examples",
            "system_prompt": true,
            "marker": true
          },
          {
            "identifier": "chatHistory",
            "name": "Chat History",
            "system_prompt": true,
            "marker": true
          },
          {
            "identifier": "tone",
            "name": "Tone reminder",
            "system_prompt": false,
            "role": "system",
            "content": "[Mood: the storm is loud; {{char}} speaks softly.]",
            "injection_position": 1,
            "injection_depth": 2
          },
          {
            "identifier": "jailbreak",
            "name": "Post-History Instructions",
            "system_prompt": true,
            "role": "system",
            "content": "[Reply as {{char}} only.]"
          }
        ],
        "prompt_order": [
          {
            "character_id": 100001,
            "order": [
              {
                "identifier": "main",
                "enabled": true
              },
              {
                "identifier": "worldInfoBefore",
                "enabled": true
              },
              {
                "identifier": "personaDescription",
                "enabled": true
              },
              {
                "identifier": "charDescription",
                "enabled": true
              },
              {
                "identifier": "charPersonality",
                "enabled": true
              },
              {
                "identifier": "scenario",
                "enabled": true
              },
              {
                "identifier": "worldInfoAfter",
                "enabled": true
              },
              {
                "identifier": "dialogueExamples",
                "enabled": true
              },
              {
                "identifier": "chatHistory",
                "enabled": true
              },
              {
                "identifier": "tone",
                "enabled": true
              },
              {
                "identifier": "jailbreak",
                "enabled": true
              }
            ]
          }
        ]
      },
      "card": {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
          "name": "Mira",
          "description": "{{char}} keeps the lighthouse on Gull Rock. She is patient, dry-humoured and notices everything the sea brings in.",
          "personality": "calm, observant, stubborn about safety",
          "scenario": "A storm has stranded {{user}} on Gull Rock for the night.",
          "first_mes": "*Mira holds the door against the wind.* In, quickly. The kettle is already on.",
          "mes_example": "<START>\n{{user}}: Does the light ever go out?\n{{char}}: Not while I'm breathing.",
          "creator_notes": "A sample card written for tavernbox's README.",
          "system_prompt": "",
          "post_history_instructions": "",
          "alternate_greetings": [
            "*Mira looks up from the logbook.* Another one washed in by the storm?"
          ],
          "tags": [
            "sample"
          ],
          "creator": "tavernbox",
          "character_version": "1.0",
          "extensions": {}
        }
      },
      "books": [
        {
          "name": "Gull Rock",
          "entries": {
            "0": {
              "uid": 0,
              "key": [
                "lighthouse",
                "light"
              ],
              "keysecondary": [],
              "comment": "The lighthouse",
              "content": "The Gull Rock light is a hundred years old; its lamp turns on clockwork Mira winds every four hours.",
              "constant": false,
              "selective": false,
              "order": 100,
              "position": 0,
              "disable": false
            },
            "1": {
              "uid": 1,
              "key": [],
              "keysecondary": [],
              "comment": "The island",
              "content": "Gull Rock is a bare island two miles off the coast; the ferry runs only in fair weather.",
              "constant": true,
              "selective": false,
              "order": 90,
              "position": 1,
              "disable": false
            },
            "2": {
              "uid": 2,
              "key": [
                "storm"
              ],
              "keysecondary": [],
              "comment": "Storm lore",
              "content": "Autumn storms here last until the tide turns.",
              "constant": false,
              "selective": false,
              "order": 100,
              "position": 4,
              "depth": 1,
              "role": 0,
              "disable": false
            }
          }
        }
      ],
      "chat": {
        "messages": [
          {
            "role": "assistant",
            "name": "Mira",
            "content": "*Mira holds the door against the wind.* In, quickly. The kettle is already on."
          },
          {
            "role": "user",
            "name": "Ash",
            "content": "Thank you. Is the storm going to last? I can see the light turning from here."
          }
        ]
      },
      "user": {
        "name": "Ash",
        "persona": {
          "description": "Ash is a courier who missed the last ferry.",
          "position": "in_prompt"
        }
      },
      "author_note": {
        "content": "Keep the scene cosy despite the storm.",
        "interval": 1,
        "depth": 4,
        "position": "chat",
        "role": "system"
      },
      "world_info": {
        "world_info_depth": 2,
        "world_info_budget": 25,
        "world_info_recursive": true,
        "world_info_character_strategy": 1
      },
      "options": {
        "post_processing": "",
        "seed": 7
      }
    }
  }
};
