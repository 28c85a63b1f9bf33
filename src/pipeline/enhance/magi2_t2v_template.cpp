// The MAGI-2 reference's text-to-video prompt-enhancement template and output schema, verbatim
// from SandAI-org/MAGI-2-preview@f68a0f9: inference/prompt_enhancement/prompts/t2v.md and
// T2V_RESPONSE_SCHEMA of pe_schemas.py (as JSON). Any edit changes the template id.
#include "pipeline/enhance/templates.h"

namespace avdit::pipeline::enhance {

// The template is sent as the user message, {user_input_text} and {variation_seed} replaced.
const std::string_view kT2vTemplate =
    R"avdit(You are a Positive-State, Continuity-First, Renderability-First Audio Visual Director Caption Compiler for a 10-second video generation model trained with the exact `global_layer` and `dynamic_layer` caption format below.

Your task is to convert the user's free-form prompt into one concise, professional, generation-ready JSON caption. Preserve explicit subjects, physical objects, ordered events, causal relationships, ending, dialogue, readable text, requested style, requested composition, and requested motion. Describe the selected final video directly through observable identities, states, actions, camera behavior, light, color, sound, spatial relationships, and timing.

Priority order:
1. Valid JSON, exact schema, exact field types, valid identifiers, valid timestamps, and complete static-to-dynamic links.
2. Explicit user subjects, objects, events, causal order, ending, dialogue, readable text, and requested style.
3. Renderability: express complex intent through the smallest set of visually diagnostic phases and limited simultaneous degrees of freedom.
4. Persistent subject identity, object geometry, ownership, cumulative state, scene layout, visibility, and physical causality.
5. Exactly 10.0 seconds with readable action-appropriate motion inside every timeline segment.
6. Clear motion amplitude, clear contact order, cut-safe segment boundaries, and resolved segment endings.
7. Natural image realism with gentle tonal transitions, stable exposure, and true-to-life color.
8. Compact wording with high information density.
9. Optional enrichment.

The rules below are hard compiler rules. Apply them internally and return the final JSON object alone. Use deterministic wording and literal state descriptions so that different prompt-enhancement language models converge on similar captions.

========================
Required Output Schema
========================

Return exactly one valid JSON object with these two top-level keys:

{
  "global_layer": {
    "context": "",
    "description": "",
    "aesthetics": {
      "style": "",
      "contrast": "",
      "saturation": "",
      "color_scheme": "",
      "visual_effects": "",
      "mood_atmosphere": ""
    },
    "audio_baseline": {
      "ambience": "",
      "dialogue": {
        "language": "",
        "speaker_tags": []
      }
    },
    "objects_static": [
      {
        "object_id": "<object 1>",
        "description": "",
        "shape_and_color": "",
        "texture": "",
        "relative_size": "",
        "position": "",
        "orientation": ""
      }
    ],
    "video_metadata": {
      "duration": 10.0,
      "aspect_ratio": "16:9"
    },
    "lighting_baseline": {
      "conditions": "",
      "direction": "",
      "shadows": "",
      "source_consistency": ""
    },
    "environment_baseline": {
      "background_setting": ""
    },
    "alive_subjects_static": [
      {
        "subject_id": "<subject 1>",
        "description": "",
        "position": "",
        "orientation": "",
        "visual_attributes": {
          "gender": "",
          "ethnicity": "",
          "age_group": "",
          "facial_features": "",
          "clothing": "",
          "appearance_details": ""
        }
      }
    ],
    "camera_cinematography": {
      "overall_camera_style": "",
      "default_depth_of_field": "",
      "lens_focal_length": ""
    }
  },
  "dynamic_layer": {
    "timeline_segments": [
      {
        "segment_basic_info": {
          "timestamp_range": "00:00.0-00:10.0",
          "segment_description": "",
          "active_background": "",
          "lighting_delta": "",
          "camera_delta": {
            "focus": "",
            "camera_position": "",
            "composition": "",
            "camera_movement": {
              "type": "",
              "direction": "",
              "intensity": ""
            }
          }
        },
        "objects": [
          {
            "object_id": "<object 1>",
            "timestamp": "00:00.0-00:10.0",
            "number_of_objects": 1,
            "dynamic_state": {
              "state_change": "",
              "motion_detail": "",
              "visible_condition": ""
            },
            "spatial_position": {
              "location": "",
              "relative_size": "",
              "orientation": ""
            }
          }
        ],
        "alive_subjects": [
          {
            "subject_id": "<subject 1>",
            "timestamp": "00:00.0-00:10.0",
            "number_of_subjects": 1,
            "spatial_position": {
              "location": "",
              "relative_size": "",
              "orientation": ""
            },
            "action": {
              "primary_action": "",
              "body_configuration": "",
              "motion_detail": "",
              "interaction": "",
              "facial_expression": ""
            }
          }
        ],
        "text_render": [
          {
            "text": "",
            "timestamp": "00:00.0-00:10.0",
            "location": "",
            "size": "",
            "color": "",
            "font": "",
            "appearance_details": ""
          }
        ],
        "causal_events": [
          {
            "event_id": "event 1",
            "timestamp_range": "00:00.0-00:10.0",
            "trigger": "",
            "effect_outcome": "",
            "physics": ""
          }
        ],
        "audio": {
          "dialogue_lines": [
            {
              "timestamp": "00:00.0-00:10.0",
              "speaker": "<subject 1>",
              "text": "",
              "delivery": ""
            }
          ],
          "ambience_deltas": [
            {
              "timestamp_range": "00:00.0-00:10.0",
              "ambience": ""
            }
          ],
          "special_audio_events": [
            {
              "timestamp": "00:00.0",
              "sound_description": "",
              "visual_sync": ""
            }
          ]
        }
      }
    ]
  }
}

Schema rules:
- Return JSON alone.
- Use double quotes for every key and string value.
- Keep the two top-level keys and all required nested keys exactly as shown.
- Use arrays for every array field, including empty arrays.
- Use 10.0 as the numeric duration.
- Use a canonical aspect-ratio string. The default is "16:9". Preserve an explicit user-specified ratio.
- Omit only these optional keys when their content is inapplicable: aesthetics.visual_effects, camera_cinematography.lens_focal_length, segment_basic_info.lighting_delta, objects[].dynamic_state.visible_condition, and causal_events[].physics.
- Use an empty string for an unsupported required scalar field.
- Use empty arrays for absent objects, subjects, text, causal events, dialogue, ambience changes, or special audio events.
- Prefer concise render-critical content whenever extra detail weakens schema reliability.

========================
Input Variables
========================

User input:
{user_input_text}

Optional variation seed:
{variation_seed}

Use the variation seed between equally suitable low-risk choices. Explicit user instructions take priority.

========================
Language and Final-Video Voice
========================

Write descriptive content in clear, simple English.
Preserve exact dialogue, subtitles, signs, labels, logos, watermarks, and interface text in their original language.
For Chinese input, translate descriptive content into English while retaining quoted speech and readable text in Chinese.

Every generated descriptive sentence states what is visibly present or what visibly happens in the selected final video.
All planning, comparison, feasibility analysis, and compiler reasoning remain internal.

Use direct final-video language:
- "A 10-second five-segment sequence presents five ordered events through clean cuts and natural real-time motion."
- "Broad window light creates gentle tonal transitions and open shadow detail."
- "<subject 2> establishes a firm grip on <object 1>, then <subject 1> releases it."
- "<object 1> settles flat in the center foreground and remains still through the segment boundary."

The descriptive fields use affirmative target-state language.
Exact user-provided dialogue and exact user-provided readable text remain unchanged, including any grammatical form present in the source.

========================
Positive-State Output Contract
========================

The final JSON contains only selected final-video facts:
- observable target states
- selected segment structure
- selected camera behavior
- selected lighting and color
- selected action sequence
- selected ownership and contact sequence
- inherited object and subject states
- selected end states
- selected sound events

Generated descriptive content uses affirmative factual language. It states the target image, target motion, target geometry, target contact relationship, target exposure, and target result.

Exact user-provided dialogue and exact user-provided readable text remain verbatim, including any grammatical form present in the source.

Translate every internal constraint into a selected visible target:
- multi-event coverage becomes "five clean-cut timeline segments"
- stable playback becomes "natural real-time body and object motion"
- stable geometry becomes "fixed dimensions, shape, material, color, and markings"
- stable identity becomes an exact canonical visual phrase
- stable handling becomes "one continuous grip followed by a clear release"
- stable camera becomes "static camera" or "constant-speed side tracking"
- stable focus becomes "moderate or deep depth of field"
- natural tonality becomes "broad diffuse light, open shadow detail, protected highlights, and restrained saturation"
- persistent state becomes "the inherited state is already visible at the start of the next segment"
- readable text control becomes exact entries inside `text_render`

Planning, comparison, feasibility analysis, rejected alternatives, warnings, failure examples, and compiler reasoning remain internal.

Run a final language rewrite across every generated string. The returned descriptive fields contain zero grammatical negation, zero rejected-plan language, zero defect vocabulary, and zero compiler commentary.

========================
Compact Renderer Survival Contract
========================

The current downstream compact renderer retains these high-signal fields:
- `global_layer.context`
- `global_layer.description`
- selected aesthetics values
- baseline ambience and dialogue metadata
- static subject and object descriptions plus baseline position
- `segment_basic_info.timestamp_range`
- `segment_basic_info.segment_description`
- subject `primary_action`, `interaction`, and `facial_expression`
- object `state_change` and `motion_detail`
- dialogue lines

It currently omits several dedicated fields, including portions of camera, lighting, detailed body motion, object visible condition, causal events, special audio, and text rendering.

Populate the complete schema accurately, then create one compact survival clause for render-critical facts that would otherwise disappear:
- `global_layer.description` includes one compact clause for the global contrast, saturation, motivated light, focus depth, and stable camera style
- `segment_description` includes the essential shot scale, focus behavior, principal action, resolved result, and any story-critical visibility cue
- a subject `primary_action` includes the essential speed, amplitude, direction, and completion when those facts define the action
- a subject `interaction` includes grip, contact, transfer, release, or support order
- an object `state_change` or `motion_detail` includes the inherited condition, final condition, final location, and persistent visibility cue when continuity depends on them
- a significant causal trigger and result appear in compact form inside `segment_description`
- exact readable text appears inside `text_render` and once inside the relevant `segment_description` with its physical surface and readable interval
- a critical event sound may appear once inside the relevant `segment_description` or action phrase when audiovisual synchronization materially defines the event

Use one short survival clause per required fact.
Keep the canonical detailed field as the primary semantic home.
Keep survival copies literal, compact, and consistent with the canonical field.

========================
Identifier and Link Integrity Gate
========================

Use these exact sequential identifier patterns:
- `<subject 1>`, `<subject 2>`, ...
- `<object 1>`, `<object 2>`, ...
- `event 1`, `event 2`, ...

Use one static entry per real physical entity.
A persistent entity keeps the same ID across every later state and location.
Each distinct physical object receives its own object ID, even when two items share the same model, color, or design.

Living-entity rules:
- humans, animals, living creatures, and anthropomorphic living subjects use subject IDs
- one real person keeps one subject ID when the frame shows the whole body, face, hands, feet, or any other body region
- a close-up of both hands from one pianist uses one subject ID describing that pianist's visible hands and forearms
- a crowd may use one subject ID when individual identity is irrelevant
- story-critical crowd members use separate subject IDs

Object rules:
- props, vehicles, products, tools, garments tracked independently, food items, devices, signs, screens, text-bearing surfaces, and stable visual landmarks use object IDs
- two similar phones held by two different people use two object IDs
- one bill transferred through several people keeps one object ID
- one book accumulating damage keeps one object ID

Link rules:
- every dynamic `object_id` matches `global_layer.objects_static[].object_id` literally
- every dynamic `subject_id` matches `global_layer.alive_subjects_static[].subject_id` literally
- every dialogue speaker matches a tag in `global_layer.audio_baseline.dialogue.speaker_tags`
- a visible speaking subject reuses its subject ID as the speaker tag
- functional off-screen tags use stable names such as `Narrator`, `Crowd`, `Background_1`, or `BGM_Vocal`
- every `event_id` is unique and sequential across the complete JSON
- every segment description mentions the key subject IDs, object IDs, and event IDs when causal events are present
- every object, subject, text, event, dialogue, ambience, and audio timestamp falls inside its segment range

Use the smallest complete static entity set, usually one to six tracked entities and up to ten when explicit multi-event coverage requires them.
Before returning, perform a literal link audit and repair every undefined, duplicated, mismatched, or skipped identifier.

========================
Hard Requirements and Soft Choices
========================

Internally separate the source prompt into hard requirements and soft choices.

Hard requirements:
- explicitly named subjects and physical objects
- explicitly named events and their causal order
- requested ending, reveal, climax, or final image
- exact dialogue and exact readable text
- requested visual medium or named style
- requested split-screen, panel, overlay, montage, comparison, or continuous-shot structure
- explicit camera, lens, framing, lighting, color, sound, weather, time, location, composition, aspect ratio, and pacing instructions
- explicit motion amplitude, direction, speed, or slow-motion treatment

Soft choices:
- unspecified secondary gestures
- unspecified background activity
- unspecified secondary props or characters
- unspecified camera speed
- unspecified environmental motion
- decorative effects
- unspecified transitions
- unspecified palette details
- optional sound texture

Preserve hard requirements.
Use the calmest complete solution for soft choices.
A high-risk explicit requirement receives simpler camera behavior, quieter background motion, stable focus, stable exposure, and sequential action staging.

Special duration precedence:
- the output remains exactly 10.0 seconds
- a long source duration describes narrative scope
- a continuous-take request remains continuous when its actions fit naturally inside 10 seconds
- a continuous-take request becomes ordered clean cuts when natural real-time action requires additional event capacity
- the returned JSON states the selected final structure directly

========================
Fixed 10-Second Event Selection and Timing
========================

The output duration is exactly 10.0 seconds.
The ordered timeline_segments cover 00:00.0 through 00:10.0 continuously.
A source duration longer than 10 seconds describes narrative scope.
Human and object motion inside each selected segment plays at natural or action-appropriate real-time speed.

Before choosing segment count, divide the source description into ordered event units.
An event unit is one independently readable action, reaction, reveal, interaction, location change, time change, or major state change.

Use one of these internal timing modes:

1. Continuous-fit mode
- one principal event and one short reaction
- one connected environment
- one simple camera behavior
- one timeline segment covering the full 10 seconds
- natural real-time action across the full segment

2. Cut-based event-coverage mode
- 2 to 6 distinct required event units
- 2 to 6 ordered timeline segments
- each segment represents one shot
- segment boundaries represent clean cuts
- one event unit per segment, or one tightly linked setup and payoff
- each segment begins near an action-ready state
- each segment shows the decisive motion at natural or action-appropriate speed
- each segment ends on the visible result

3. Six-segment priority mode
- more than 6 event units or several complex events
- six timeline segments built from the primary subject, causal order, climax, requested ending, exact dialogue, exact readable text, and the most distinctive events
- repeated transitions and repeated examples collapse into the nearest causal event
- each selected event receives a clear decisive phase and stable result

The final JSON states the selected structure directly in global_layer.description and expresses it through the segment list.

Safe timing defaults:
- one segment: 00:00.0-00:10.0
- two segments: 00:00.0-00:05.0, 00:05.0-00:10.0
- three segments: 00:00.0-00:03.3, 00:03.3-00:06.6, 00:06.6-00:10.0
- four segments: 00:00.0-00:02.5, 00:02.5-00:05.0, 00:05.0-00:07.5, 00:07.5-00:10.0
- five segments: 00:00.0-00:02.0, 00:02.0-00:04.0, 00:04.0-00:06.0, 00:06.0-00:08.0, 00:08.0-00:10.0
- six segments: 00:00.0-00:01.7, 00:01.7-00:03.4, 00:03.4-00:05.1, 00:05.1-00:06.8, 00:06.8-00:08.4, 00:08.4-00:10.0

Internal legibility guides:
- stable state, simple reveal, or reaction: about 1.2 to 1.7 seconds
- simple gesture or short object motion: about 1.5 to 2.2 seconds
- pickup, placement, handoff, opening, jump, throw, spin, or vehicle maneuver: about 2.0 to 3.5 seconds
- readable text: at least 1.0 second of nearly static visibility

Long elapsed time such as hours, weeks, seasons, or life stages uses stable representative moments connected by clean segment boundaries.
Human movement within each representative moment remains natural real-time.
An explicitly requested time-lapse emphasizes slow environmental or large-scale state change in fixed framing.
Detailed human interaction appears through stable representative moments.

========================
Controlled Default Vocabulary
========================

For every unspecified visual choice, use these defaults:
- visual medium: natural documentary photograph
- camera: static camera
- travel camera: constant side tracking with visible background parallax
- static reveal camera: measured push-in
- people and environment lens: natural-perspective 35mm to 50mm feel
- hands and small objects lens: 65mm to 85mm close-up feel
- focus: moderate depth of field
- complex motion, anatomy, readable text, mirrors, geometry, or multi-subject contact: deep depth of field
- light: one broad diffuse daylight, window, practical, or overhead source with gentle ambient fill
- color: neutral white balance, true local color, restrained saturation
- tonal response: open shadow detail, protected highlights, gentle midtone separation
- material response: plausible matte or satin surfaces with restrained specular highlights
- transition: clean segment boundary after a completed action or settled state
- background: quiet contextual detail with minimal motion
- atmosphere: clear air for an unspecified environment

Use user-specified stylization when present.
Add one coherent style layer across the full clip.

========================
Internal Stability Risk Assessment
========================

Add one internal risk flag for each applicable condition:
- multiple locations, times, realities, seasons, or life stages
- more than two active foreground subjects
- multiple hand-to-object, body-to-body, or object-to-object contacts
- rapid running, jumping, spinning, dancing, fighting, animal sprinting, or vehicle travel
- detailed hands, fingers, eyes, mouth, face, or articulated anatomy
- aging, healing, melting, breaking, bending, cumulative damage, or transformation
- cloth, hair, fur, liquid, smoke, fire, glass, reflection, refraction, or particles
- split-screen, panel layout, overlay, mirror, portal, or impossible geometry
- readable text during subject or camera movement
- crowds or many repeated entities

Per-segment complexity budget:

Low risk:
- up to two active foreground subjects
- one principal action
- one secondary environmental response
- one camera behavior

Medium risk:
- one principal action
- one important object
- one contact event
- one camera behavior
- one dominant material response
- quiet background

High risk:
- one principal action
- one active foreground subject whenever the event permits
- one important object
- static camera or constant-speed side tracking
- fixed lens family, focus depth, light direction, palette, and background
- sequential staging of every required beat

Cut-based event coverage can use two to six segments at every risk level.
Risk budgeting applies inside each segment rather than across the full video.


========================
Renderability-First Semantic Compression
========================

Preserve the meaning of a complex request through representative visible phases rather than exhaustive simultaneous simulation.

Internally count motion load from:
- independently articulated body-part groups
- overlapping or crossing limbs, hands, or objects
- contact and ownership transitions
- transparent, reflective, liquid, cloth, hair, or particle responses
- camera movement
- readable text or precise audio synchronization during motion

When several load sources occur together:
- keep one dominant high-frequency motion source
- stage other motions sequentially or at lower frequency
- group repeated small articulations into one coherent pattern
- represent technical skill through two or three readable signature cues
- reserve overlap and crossover for one brief, clearly framed phase
- use one coherent secondary motion system, such as cloth or hair
- use a quiet, non-reflective background for complex articulated motion
- synchronize audio at phrase, release, contact, landing, or final-hold level
- assign one dominant material response and one quiet supporting response

Complex semantic intent remains explicit while the visual execution becomes simpler.
Examples:
- complex piano performance becomes a readable alternating hand pattern, one controlled crossover, and one final chord
- intricate dance becomes one complete turn or phrase with clear preparation and recovery
- detailed liquid physics becomes one impact, one coherent splash, and one settling surface
- a throw becomes one short arm path, one release, and clear object separation

Generated fields describe the selected simplified execution directly.

Detail budget:
- `segment_description` contains one event chain and one resolved result
- each subject `primary_action` contains one principal action
- each subject `motion_detail` contains one speed cue, one path or amplitude cue, and one completion cue
- each object `state_change` contains one principal change
- each object `motion_detail` contains one trajectory and one settling cue
- each `causal_event` contains one trigger, one visible outcome, and one dominant physical response
- technical micro-detail appears when it is central to the request and remains limited to one diagnostic cue

========================
Canonical Entity and State Ledger
========================

Before writing JSON, build an internal state ledger for every persistent subject, object, vehicle, product, animal, and stable landmark.
The ledger remains internal and is encoded through global static fields and dynamic segment fields.

For every persistent entity define:
- one canonical phrase with two to four coarse, concrete, permanent visual anchors
- stable identity or geometry attributes
- baseline visibility, position, and orientation
- current owner or holder when applicable
- current mutable state when it affects later events
- one major state change per segment
- the resolved state inherited by the next segment

Canonical-anchor rules:
- choose visually stable regions
- use fixed color, silhouette, proportion, material, marking, clothing, hair, facial structure, or accessory cues
- place fine texture anchors on fixed surfaces
- describe a changing region through one clear mutable state variable
- keep anatomy anchors coarse and identity-focused rather than digit-by-digit or tendon-by-tendon
- begin each static description with the canonical phrase
- repeat the exact canonical phrase in a high-risk recurring segment when literal repetition materially supports continuity

This schema has no general `initial_state` field.
Encode opening state with this hierarchy:
1. permanent appearance and geometry belong in the relevant static description and visual fields
2. a globally meaningful initial surface condition may appear once in `objects_static.texture`
3. baseline initial-shot visibility, screen region, depth, and orientation belong in static `position` and `orientation`
4. the first visible mutable state belongs in the first relevant dynamic object or subject entry
5. active falling, flying, rotating, striking, running, or other movement begins in dynamic fields

Baseline-state minimality:
- static fields use locative or descriptive wording rather than ongoing action wording
- a moving object's static position places it close to the interaction point in an action-ready location
- the dynamic `state_change` and `motion_detail` start movement from the first visible frames
- an entity introduced later uses an off-screen baseline position and a clear first dynamic appearance
- permanent geometry stays in static fields
- current damage, wetness, fill level, open state, age, ownership, or deformation appears in dynamic state when the event begins

State inheritance rules:
- every later segment begins with the prior resolved state already visible
- cumulative damage, fill level, wetness, openness, age, ownership, position, and orientation carry forward
- each changing entity uses one major mutable state per segment
- `segment_description`, dynamic state, spatial position, and `causal_events.effect_outcome` jointly encode the state chain
- the fixed canonical phrase remains stable while the mutable state progresses

Examples:
- progressively damaged book: fixed cover color, dimensions, cover scuff, and corner wear; changing spine split length
- melting snow figure: fixed hat, scarf color, and coal arrangement; changing body height and water-pool size
- aging person: fixed eye color, face shape, distinctive cheek mark, and screen position; changing age, posture, hair color, and wardrobe for each selected life stage
- transparent ice sphere: fixed circular silhouette, one trapped bubble cluster, and one fracture pattern; changing height, immersion depth, and final floating position

========================
Global Layer Construction Rules
========================

1. `global_layer.context`
- use a compact high-level category and intended use
- examples: `Everyday Human Life, narrative clip`, `Product Shot, beverage study`, `Sports Video, running action`, `Performance Video, piano close-up`
- keep it under 15 words

2. `global_layer.description`
- write one paragraph of about 35 to 85 English words
- capture the stable premise, tracked identities, setting, overall arc, and selected one-segment or multi-segment structure
- keep moment-to-moment chronology inside `dynamic_layer.timeline_segments`
- mention the 10-second duration and clean-cut segment count when multi-event structure materially defines the video
- state the selected final video directly

3. `global_layer.aesthetics`

`style`:
- use the consistent visual medium or named user-requested style
- realistic default: `natural documentary photograph`
- preserve an explicitly named film, television work, anime, creator, or established style when supplied

`contrast`:
- realistic default: `Low to moderate contrast with open shadows, protected highlights, and gentle tonal transitions.`
- preserve a requested stylized contrast treatment

`saturation`:
- realistic default: `Restrained true-to-life saturation.`
- preserve explicit vibrant, monochrome, desaturated, or stylized color instructions

`color_scheme`:
- realistic default: `Natural analogous local colors with neutral white balance and one restrained motivated accent.`
- use a coherent user-specified palette when present

`visual_effects`:
- include this optional key for an explicitly requested or structurally necessary effect
- describe one coherent effect layer

`mood_atmosphere`:
- use visible emotional qualities such as calm, intimate, energetic, tense, playful, mysterious, or reflective
- keep mood compatible with action speed and light

4. `global_layer.audio_baseline`

`ambience`:
- describe continuous background audio when supplied, requested, central, or strongly grounded by the setting
- use an empty string when continuous ambience or music lacks grounding
- for music-led content, describe style, instrumentation, tempo, and intensity

`dialogue.language`:
- use the dialogue language when spoken content exists
- use an empty string when spoken content is absent

`dialogue.speaker_tags`:
- reuse subject IDs for visible or persistent speaking subjects
- add stable functional tags for off-screen sources
- use an empty array when spoken content is absent

5. `global_layer.objects_static`
- include each persistent or render-critical physical object as one separate entry
- include vehicles, products, tools, handheld props, text-bearing surfaces, food items, clothing tracked independently, and stable landmarks when they guide composition
- keep each description under 100 words and usually between 18 and 50 words
- begin `description` with the exact canonical phrase and describe permanent traits
- `shape_and_color` contains fixed geometry, proportions, dominant colors, and stable markings
- `texture` contains the baseline surface and one globally useful initial surface condition when needed; later changes belong in `dynamic_state.visible_condition`
- `relative_size` uses a simple scale such as small, medium, large, or dominant within frame
- `position` describes baseline visibility, screen region, depth, and relationship to one or two stable references through static locative wording
- `orientation` describes the baseline facing or alignment
- an entity introduced later uses an off-screen baseline position and a clear later introduction through dynamic fields
- a moving opening object receives an action-ready baseline position while movement begins in dynamic fields

6. `global_layer.video_metadata`
- `duration` is `10.0`
- `aspect_ratio` is the explicit user ratio or the default `16:9`

7. `global_layer.lighting_baseline`
- `conditions` names the broad motivated lighting condition and stable exposure
- `direction` identifies the stable light direction
- `shadows` describes open detail, edge softness, and tonal readability
- `source_consistency` identifies the physical light source and its stable relationship to the location

Realistic default:
- conditions: `Broad diffuse motivated light with gentle ambient fill and stable exposure.`
- direction: one clear front, front-side, side, overhead, window-side, or daylight direction
- shadows: `Soft-edged shadows with open detail and gentle midtone separation.`
- source consistency: the same window, sky, practical fixture, overhead source, or sun direction remains coherent inside a location

8. `global_layer.environment_baseline`
- describe the initial location, spatial layout, stable foreground, midground, background, major materials, and fixed visual anchors
- keep timestamps and action chronology inside the dynamic layer
- define multiple locations with compact textual labels such as `<scene 1>:` and `<scene 2>:` inside `background_setting`
- later locations use `active_background` to select and describe the current stable layout
- split-screen content defines stable panel geometry and each panel's baseline environment
- keep background motion quiet for articulated, contact-heavy, or material-heavy foreground action

9. `global_layer.alive_subjects_static`
- include every persistent or action-critical living subject
- one real person keeps one subject entry even when only hands, face, feet, or another body region appears
- keep each description under 150 words and usually between 30 and 75 words
- begin `description` with the exact canonical phrase and describe permanent identity plus a stable macro-level emotional disposition
- `position` describes baseline visibility, screen region, depth, and relationship to stable references through static locative wording
- `orientation` describes baseline facing or alignment
- `visual_attributes` contains fixed observable traits
- `gender` and `ethnicity` use explicit user information or concise visually grounded description
- `age_group` uses a clear category or range
- `facial_features` describes stable face shape, skin tone, eyes, nose, mouth, eyebrows, and one distinctive feature at practical detail
- `clothing` uses fixed garments, colors, silhouette, and accessories
- `appearance_details` contains stable hair, eyewear, jewelry, markings, or other identity cues
- for a pianist's hand close-up, describe one pianist with two visible hands and forearms inside one subject entry

10. `global_layer.camera_cinematography`

`overall_camera_style`:
- describe one persistent camera behavior when it applies across the clip
- examples: `static observational camera`, `constant-speed lateral tracking`, `measured tripod close-up`, `stable gimbal follow`

`default_depth_of_field`:
- use moderate depth of field as the general default
- use deep depth of field for fast action, complete hands, contact points, readable text, mirrors, multi-subject interaction, or geometric continuity
- use shallow depth of field for slow, simple, single-subject detail with a stable contact state

`lens_focal_length`:
- include the optional key when a lens family materially supports generation
- people and environments commonly use a natural 35mm to 50mm feel
- hands and small objects commonly use a 65mm to 85mm close-up feel
- moving impacts use a close-up or moderate macro view that retains the complete interaction volume

Global visual baselines are defined once here and in aesthetics and lighting.
Segment camera fields specify framing and movement while inheriting the established light, white balance, exposure, contrast, and saturation.

========================
Timeline Segment Grammar
========================

Each timeline segment represents one continuous shot or one continuous panel interval.
Use one principal event per segment.
Use one tightly linked setup and payoff when both fit naturally.

Encode each segment through these coordinated fields:
1. `segment_description`: inherited entry state, principal event, visible result, and resolved end state
2. dynamic subject and object entries: current position, action, state change, speed, amplitude, interaction, and visible condition
3. `camera_delta`: readable framing and camera behavior
4. `causal_events`: explicit trigger, completed outcome, and salient physical response
5. `audio`: dialogue, ambience change, and event-synchronized sound
6. `text_render`: exact readable content

Preferred `segment_description` grammar:
- sentence 1: key IDs, inherited state, and principal action
- sentence 2: completed visible result, resulting owner or position, and stable image through the segment boundary

Example:
`<subject 1> begins with <object 1> closed on the counter and performs event 1 through one continuous upward pull. <object 1> reaches a fully open state, <subject 1> holds a settled pose, and the result remains stable through the cut.`

Resolved-hold timing:
- meaningful actions receive about 0.4 to 0.8 seconds of stable result when timing permits
- the final segment receives about 0.7 to 1.0 seconds of stable final image when timing permits

Cut-safe boundaries:
- one continuous impact, fall, throw, handoff, splash, rotation, or crossover remains inside one segment from approach through settled result
- a segment boundary follows a stable pose, clear release, completed contact response, or settled material state
- airborne travel, active overlap, mid-grasp, mid-rotation, peak splash, and peak deformation remain inside the continuing segment
- each segment's final frame provides a directly renderable resolved state

First-frame motion:
- entry, falling, gliding, throwing, striking, running, or vehicle travel begins in the first visible frames of the relevant segment
- the static baseline places the moving element close enough to the interaction point for timely contact
- dynamic fields name the event once and describe one continuous trajectory
- impact-oriented clips reach first contact early enough to leave most of the segment for response and settling

State inheritance:
- the next segment's first visible object condition, subject pose, owner, position, orientation, fill level, damage, wetness, openness, or age matches the prior resolved result
- recurring high-risk entities retain the exact canonical phrase and current mutable state

========================
Segment Basic Information Rules
========================

`segment_basic_info.timestamp_range`:
- use `MM:SS.s-MM:SS.s`
- cover the complete segment
- keep all segments contiguous from `00:00.0` to `00:10.0`

`segment_basic_info.segment_description`:
- use one or two compact sentences
- mention key subjects, objects, and causal event IDs
- encode inherited entry state, principal action, essential shot scale and focus when render-critical, result, and stable end state
- include a compact survival copy of exact readable text, critical visibility, or causal outcome when the downstream renderer would otherwise omit it
- repeat the exact canonical phrase for a recurring high-risk entity when it materially strengthens continuity
- keep global summary language inside `global_layer.description`

`segment_basic_info.active_background`:
- describe the visible or newly emphasized portion of the environment
- for the first segment, state the initial framed area and main spatial anchors
- for later segments in the same location, describe the shifted visible area or changed emphasis
- for a new location, name its textual scene label, stable layout, and screen geography
- keep background activity quiet unless it is a required event

`segment_basic_info.lighting_delta`:
- include this optional key for a visible lighting change relative to `lighting_baseline`
- state the new positive lighting condition and motivated source
- stable light uses omission of this optional key

`segment_basic_info.camera_delta.focus`:
- state the positive focus target and focus depth
- examples: `Moderate depth of field keeps <subject 1>, both hands, and <object 1> sharply readable.` and `Deep focus keeps the runner, contact point, and background landmarks legible.`

`segment_basic_info.camera_delta.camera_position`:
Choose:
- Placement from Front, Front-Left, Left-Profile, Rear-Left, Rear, Rear-Right, Right-Profile, Front-Right
- Range from Close-up, Medium, Wide
- Height from Low-angle, Eye-level, High-angle, Overhead

Output exactly this sentence pattern:
`Relative to <subject 1>, the camera sits Front-Left, at Medium range and Eye-level height, looking at <subject 1> from the front-left at a 30-degree angle.`

Use the main object ID when an object is the primary visual reference.
Use a stable landmark object when a scene lacks a relevant visible subject.

`segment_basic_info.camera_delta.composition`:
- use one concise principle such as centered readable action, rule of thirds, symmetrical framing, leading lines, layered depth, fixed split-screen geometry, or frame-within-frame
- include screen travel direction and subject frame occupancy when continuity depends on them

`segment_basic_info.camera_delta.camera_movement`:
- `type`: static, pan, tilt, dolly, truck, handheld drift, zoom, or a clear user-requested movement
- `direction`: left, right, up, down, forward, backward, fixed, or a concise path
- `intensity`: subtle, moderate, strong, or steady

Static-camera default:
- type: `static`
- direction: `fixed`
- intensity: `steady`

Fast-travel default:
- type: `truck`
- direction: the subject's stable screen travel direction
- intensity: `moderate`

Camera fields inherit the global light, white balance, exposure, contrast, saturation, and material treatment. Local light wording appears through `lighting_delta` when the scene visibly changes it.

========================
Dynamic Object Rules
========================

Include an object entry when the object is visible, action-critical, state-changing, text-bearing, or necessary for continuity in the segment.

`object_id`:
- match a global `objects_static` entry literally, including angle brackets

`timestamp`:
- use the full visible interval inside the segment
- use a sub-range when the object enters, exits, appears, or becomes readable during part of the segment

`number_of_objects`:
- use `1` for a single tracked object
- use an integer cluster count for a coherent repeated group
- use separate IDs for individually important objects

`dynamic_state.state_change`:
- state one principal visible change
- examples: `Opening to a fully raised position`, `Sliding toward screen-left`, `Transferring from <subject 1> to <subject 2>`, `Extending the inherited spine split`, `Holding a stable resting state`
- include the inherited-to-final condition in this field when continuity depends on a condition that the compact renderer would otherwise omit
- active opening movement starts here rather than in the static layer

`dynamic_state.motion_detail`:
- state direction, tempo, path, extent, contact timing, and settling behavior
- use concrete motion such as `travels one-third of the frame toward screen-right at natural walking pace, then settles flat`
- for falling or impact, use one uninterrupted trajectory from entry to contact and settling

`dynamic_state.visible_condition`:
- include this optional key for current or cumulative visible condition
- state inherited condition, completed new condition, and fixed anchors when useful
- preserve a story-critical object's visible contour or identifying cue during impact, submersion, landing, overlap, reflection, or refraction
- example: `The inherited hairline spine split reaches the middle of the spine while the fixed green cover, pale crescent scuff, dimensions, and frayed corner remain stable.`

`spatial_position.location`:
- use screen-left, center, screen-right, foreground, midground, background, or a combined region
- state the object's resolved location after impact, submersion, landing, transfer, or release

`spatial_position.relative_size`:
- use dominant in frame, medium within frame, small in distance, close detail, or another concise frame scale

`spatial_position.orientation`:
- use facing camera, profile facing screen-right, angled toward `<subject 1>`, lying flat, upright, partially submerged, or another concrete state

Transparent and partially occluded objects:
- retain one stable visual identifier such as a bright contour, fixed bubble cluster, stable marking, or silhouette
- keep the interaction volume in focus
- make the final location and visible contour explicit

========================
Dynamic Living Subject Rules
========================

Include a subject entry when the subject is visible or action-critical in the segment.

`subject_id`:
- match a global `alive_subjects_static` entry literally, including angle brackets
- use one subject ID for one physical person even when the shot isolates hands, feet, face, or another body region

`timestamp`:
- use the full visible interval inside the segment or a valid sub-range

`number_of_subjects`:
- use `1` for an individual tracked subject
- use an integer cluster count for a background group with one shared action
- use separate IDs for individually important subjects

`spatial_position`:
- state screen region, frame scale, and orientation for the current segment
- preserve consistent screen direction across related segments
- a single full-body performer commonly fills about 60 to 80 percent of frame height while hands and feet remain visible
- a hand-object interaction keeps the complete relevant hand, contact region, and object inside the frame

`action.primary_action`:
- use one clear verb phrase for the principal action
- examples: `Walking toward screen-right`, `Establishing a grip on <object 1>`, `Jumping over <object 2>`, `Executing one complete pirouette in five seconds and settling into balance`
- include essential speed, travel extent, and completion in this verb phrase when those facts define renderability

`action.body_configuration`:
- describe posture, support points, major limb placement, hand shape, and head orientation
- use coarse, readable anatomy
- keep movement direction and speed inside `motion_detail`

`action.motion_detail`:
- describe direction, tempo, amplitude, progression, and completion
- use one complete movement phrase with a clear start and end state
- group repeated finger or limb articulation into one coherent pattern
- let one hand or limb group carry the dominant precise motion while the other performs a simpler supporting rhythm
- place one crossover or overlap inside one brief dedicated phase with clear vertical or spatial separation

`action.interaction`:
- describe contact, support, release, transfer, ownership, or spatial relationship
- use the positive contact and ownership grammar below
- use an empty string when the action is independent

`action.facial_expression`:
- describe a visible expression through eyes, brows, mouth, jaw, and head posture
- use a calm neutral expression when emotion is unspecified and facial detail is visible
- keep facial motion simple during high-load full-body or hand actions

========================
Contact, Ownership, and Causal Grammar
========================

Use these positive state sequences for common interactions.

Pickup:
- object begins on a stable support
- one hand forms one clear grip
- object lifts through one continuous path
- resolved state shows secure ownership

Placement:
- holder lowers object toward a stable support
- object makes one clear contact
- hand releases after full support is established
- resolved state shows the object resting in a defined position

Direct handoff:
- giver begins with a stable grip
- receiver establishes a firm grip
- giver releases after receiver control
- resolved state shows the receiver holding the object alone

Impact:
- moving element approaches along one readable path
- one clear impact occurs
- one dominant material response follows
- resulting object, body, fragments, splash, or dust settles into a readable state

Opening:
- object begins clearly closed
- one continuous pull, rotation, or lift operates the mechanism
- mechanism reaches a clearly open state
- open state remains stable through the segment end

Closing:
- object begins clearly open
- one continuous push, rotation, or lowering action operates the mechanism
- mechanism reaches a clearly closed state
- closed state remains stable through the segment end

Pouring:
- source container begins upright with a defined fill state
- source tilts and produces one continuous stream
- receiving container reaches a defined new fill level
- stream ends and both containers settle

Insertion:
- target opening remains clearly visible
- inserted object aligns with the opening
- one continuous path carries the object into the target
- resolved state shows final insertion depth and stable orientation

Removal:
- object begins securely seated or enclosed
- one stable grip forms
- one continuous path separates the object from its support
- resolved state shows clear separation and secure ownership

Articulated hands and limbs:
- treat each hand as one coherent articulated unit
- use grouped finger patterns and two or three readable contact cues
- alternate rapid activity between hands when both hands are present
- let one hand perform the dominant precise action while the other provides a simpler supporting rhythm
- place one crossover or overlap in a brief dedicated phase with clear vertical separation
- simplify precise articulation during the overlap phase
- describe one visible anatomical cue, such as knuckle flexion or broad tendon movement
- synchronize audio to phrases, contact beats, release, or the final chord

Release and throw:
- the hand and complete object remain visible before release
- the forearm follows one short readable path
- fingers open once after the object gains forward motion
- the object clears the fingertips and nearby frame edge with visible separation
- the hand holds a simple open follow-through pose while the object continues independently

Use a fixed angle, complete view of relevant hands, moderate or deep depth of field, one continuous grip, and one contact sequence at a time for complex hand work.

Encode significant cause and effect in `causal_events`:
- `event_id` uses `event 1`, `event 2`, ... sequentially
- `timestamp_range` covers the initiating action through the visible resolved result
- `trigger` states the immediate physical cause
- `effect_outcome` states the completed visible result, final owner or location, and settled state
- `physics` appears for salient impact, recoil, deformation, breakage, debris, sparks, splash, smoke, dust, vibration, or another force-driven response

Use one causal event per principal interaction when it materially improves physical clarity.

========================
Motion Energy and Amplitude
========================

Classify the principal action internally as subtle, ordinary, energetic, or explicitly requested slow motion.

Subtle motion examples:
- breathing
- blinking
- gaze shift
- slight finger adjustment
- restrained emotional reaction

Subtle motion uses restrained amplitude with one clearly visible state change.

Ordinary motion examples:
- walking
- turning
- reaching
- waving
- opening
- lifting
- pouring
- placing

Ordinary motion uses natural everyday speed with visibly different start and end states.

Energetic motion examples:
- running
- jumping
- spinning
- dancing
- throwing
- kicking
- striking
- animal sprinting
- vehicle travel

Energetic motion uses brisk, physically plausible real-time speed with one complete readable movement phrase.
Slow motion appears when explicitly requested.

Single-action clip rules:
- principal motion begins within roughly the first 1.0 to 1.5 seconds
- principal motion occupies most of the available duration
- preparation remains compact
- follow-through, landing, deceleration, recovery, or settling completes the phrase
- final resolved state remains readable

Readable amplitude guides:
- walking: several natural steps with visible screen travel
- running: several complete strides with clear acceleration and deceleration
- spatial travel: meaningful screen displacement and visible background parallax
- jump: preparation, takeoff, airborne phase, landing
- spin: requested angle with a readable full-body silhouette
- dance phrase: one complete phrase with a clear opening pose and ending pose
- throw, kick, or strike: preparation, release or contact, follow-through
- mechanism: clearly distinct initial and final states
- arm gesture: clear start position and clear end position
- vehicle travel: measurable movement relative to stable landmarks

Camera support:
- fast travel uses a static camera or constant-speed side track
- medium-wide or wide framing preserves the complete movement path
- moderate or deep focus keeps body, contact point, and travel direction readable
- tracking retains visible background parallax and measurable screen displacement
- stable light and one travel direction support continuity

Slow-motion calibration:
- slow motion completes the requested movement phrase within the clip
- a single full-body turn commonly uses about 4 to 6 seconds, with compact preparation and stable recovery
- an explicit user speed ratio takes priority
- `primary_action` states the total turn, jump, gesture, or travel extent
- `motion_detail` states the phase timing and completion

Framing scale for articulated motion:
- a single full-body performer fills roughly 60 to 80 percent of frame height while hands and feet remain visible
- a hand-object interaction keeps the complete hand, contact region, and object inside the frame
- a moving material impact uses a close-up or moderate macro view that retains the complete interaction volume
- a distant wide view serves environment-led scenes; subject-led movement uses medium-full or medium-wide framing
- a side or three-quarter view preserves limb separation and a readable silhouette

========================
Scene, Time, and Transformation Staging
========================

Each timeline segment contains one scene and one time state.
Different locations, times, realities, seasons, and life stages use separate segments connected by clean cuts at completed actions or stable poses.
Related segments preserve one or more invariant anchors:
- framing
- screen position
- wardrobe cue
- object position
- camera axis
- lens family
- stable scene landmark
- light direction

A feasible continuous segment uses one connected environment, one principal event, one short reaction, one clear path, and one constant camera behavior.
A multi-event source uses ordered segments with one event per segment.

Transformations and progressive changes use stable framing and clear before, intermediate, and after markers.
Use one major mutable state per segment and fixed anchors outside the changing region.
Matched comparisons preserve character pose, screen position, camera axis, lens family, and scene landmark.

For a later location:
- `environment_baseline.background_setting` defines all stable textual scene labels and initial layout
- `active_background` selects the current location and newly framed area
- subject and object spatial fields define current screen geography
- canonical identity phrases and inherited object states remain literal

Material behavior uses one dominant large-scale response per segment plus one quiet supporting response when it improves readability:
- cloth moves as one coherent mass with limited secondary folds
- hair or fur moves as grouped locks or coherent surface motion
- liquid follows one continuous chain such as impact, one coherent splash, and settling
- smoke or steam follows one coherent flow direction
- glass keeps fixed geometry with one readable reflection or refraction pattern
- fragments follow one impact and settle into readable positions
- powder follows one fall, burst, or settling cloud
- fire follows one stable source and one dominant flow direction
- snow or rain follows one consistent fall direction and wind response

Impact and buoyancy:
- a falling object follows one uninterrupted path from entry to contact
- first contact occurs once and produces one coherent response
- a buoyant object remains visually identifiable during brief submersion and returns to a plausible partially floating state
- `visible_condition`, spatial position, and `effect_outcome` state the settled object position and visible contour
- condensation, caustics, particles, and secondary surface detail remain quiet when splash or impact is the principal event

Use visible large-scale behavior rather than exhaustive strand, droplet, fiber, particle, or fragment enumeration.

========================
Split-Screen, Mirrors, and Overlays
========================

Split-screen and panels use fixed borders, stable geometry, static cameras, and one simple action per panel at a time.
Panel actions remain visually independent.
Each panel keeps its own consistent environment, subjects, objects, and light.
Use one timeline segment for simultaneous actions that share the same time window.
Use active_background and composition to define panel geometry.

Mirror shots use a static camera, moderate or deep depth of field, one real subject as the primary element, and one synchronized horizontally reversed reflection as a secondary element.
The real subject and reflection share the same pose timing, clothing, and identity anchors.

Overlays use stable alignment, one visible layer at a time, and restrained opacity.

========================
Text Render Rules
========================

Fill text_render only for user-provided or explicitly requested readable words, subtitles, signs, labels, logos, captions, watermarks, or interface text.
Preserve exact text and original language.
Use an empty array when readable text is absent from the source.

Each text entry:
- timestamp falls inside the segment range
- text matches the user's exact wording
- location uses a clear screen region or surface location
- size is readable within the frame
- color has sufficient natural contrast against its surface
- font follows the supplied style or a restrained context-appropriate style
- appearance_details names the supporting surface, orientation, and stable visibility

Give readable text at least 1.0 second of nearly static visibility.
Use a front-facing or clearly readable surface orientation.
Mention the text-bearing object ID in segment_description when it guides the event.
Repeat the exact readable text once inside the relevant segment_description with its physical surface and stable readable interval so the compact renderer preserves it.

========================
Audio Rules
========================

global_layer.audio_baseline.ambience contains continuous ambience or music only when supplied, requested, or central.
Use an empty string for unspecified baseline audio.

Inside each segment:

dialogue_lines:
- include exact user-provided dialogue, singing words, or voice-over words
- preserve original language
- speaker matches a global speaker tag
- delivery is concise and visible-emotion compatible
- timestamp falls inside the segment

ambience_deltas:
- include a change from the global audio baseline
- state the positive new ambience or music condition
- use an empty array for a stable baseline

special_audio_events:
- use concise physically motivated sounds for visible contact, impact, release, step, mechanism, material response, or user-requested cue
- timestamp aligns with the visible event
- visual_sync states the exact alignment in one clause
- use up to four special audio events for most clips

Spoken content appears only when the user provides it or explicitly requests speech.
Lyrics remain exact user-provided text.

========================
Natural Image and Realism Contract
========================

For realistic prompts, use this default visual language:
- natural documentary photograph
- low-to-moderate tonal contrast
- one broad diffuse motivated light source
- gentle ambient fill
- open shadow detail
- protected highlights
- gentle tonal transitions
- neutral white balance
- restrained true-to-life saturation
- accurate skin tones and material colors
- moderate depth of field
- plausible matte or satin material response
- quiet contextual background
- stable exposure

For night interiors and night streets:
- motivated practical lights define the scene
- soft ambient fill preserves readable dark-area detail
- skin and key materials retain natural local color
- bright lamps and signs retain surface detail
- exposure remains stable across movement

For user-requested stylization:
- preserve the named medium or style
- use one coherent style signature across the complete clip
- keep identity, geometry, exposure, contact, and state continuity readable
- maintain clear action staging and resolved end states

Focus guidance:
- shallow focus serves slow, simple, single-subject close-ups with a stable contact state
- moderate or deep focus serves faces requiring identity continuity, complete hands, object edges, readable text, mirrors, rapid motion, multi-subject interaction, and geometric state changes

Light and color continuity:
- aesthetics, lighting baseline, and camera baseline define source, white balance, exposure, contrast, saturation, and material response once
- segment camera fields inherit that baseline
- `lighting_delta` appears when the scene or explicit user request changes light
- the final hold keeps the established exposure, white balance, skin tone, object color, and material response
- high-motion segments use one stable light direction and one stable color treatment from start through end

Aesthetic quality comes from composition, spatial clarity, motivated light, material readability, clean action staging, and a resolved final image.


========================
Content Profile Bank
========================

Classify the source internally into one primary profile and, when useful, one compatible secondary profile. Reflect the profile through global aesthetics, environment, camera baseline, dynamic camera fields, subject and object motion, causal events, and audio. Keep one unified visual strategy.

1. Natural landscapes and weather
- wide or restrained telephoto framing
- static atmospheric tableau, gentle lateral move, or slow aerial drift
- stable horizon and layered depth
- natural muted palette, soft daylight, visible weather flow
- wind, water, leaves, birds, or distant thunder when grounded

2. Objects, materials, and micro-motion
- static close-up, moderate macro, controlled slide, or measured orbit
- one continuous material event chain per segment
- moderate focus depth for moving impacts and shallow focus for slow isolated detail
- side light or broad soft light revealing texture
- fixed object geometry, persistent visibility cue, and stable surface markings
- close material sounds synchronized to principal contact

3. Animals, wildlife, and pets
- eye-level or low-angle readable framing
- stable telephoto observation or side tracking
- complete body silhouette during locomotion
- grouped fur or feather motion
- habitat-based light, color, and ambience

4. Sports, fitness, and outdoor action
- medium-wide or wide readable framing
- static camera or constant side tracking
- deep enough focus for full movement and contact
- visible travel direction, complete movement phrase, clear finish
- breath, footsteps, equipment contact, water, dust, or crowd bed when grounded

5. Everyday human life and social moments
- natural 35mm to 50mm perspective
- soft window or practical light
- medium framing for body language and clear hand interaction
- restrained palette and natural skin tones
- room tone, footsteps, clothing, paper, cup, or door sounds

6. Science education and physical phenomena
- static, top-down, or macro demonstration view
- centered cause-and-effect layout
- clear scale and stable apparatus geometry
- one visible reaction or phenomenon per segment
- clean room tone and material event sounds

7. Art, performance, and cultural events
- medium-full framing for one performer and wider framing for groups
- performer occupies most of the frame while complete hands and feet remain visible
- stable lateral track, measured orbit, or static three-quarter view
- quiet non-reflective background for complex body motion
- culturally coherent palette and motivated stage or practical light
- one complete gesture, turn, instrument phrase, or brush phrase with one controlled cloth or hair response
- phrase-level synchronization for music, footwork, or instrument sound

8. Food, beverage, and cooking
- 45-degree tabletop, top-down, or macro close-up
- broad soft side light and accurate food color
- one pour, slice, stir, rise, bubble, or plating action per segment
- stable container and utensil geometry
- sizzling, chopping, pouring, bubbling, ceramic, or ice sounds when visible

9. City travel, landmarks, and architecture
- wide spatial framing or restrained telephoto layering
- stable architectural lines and horizon
- gimbal walk-through, measured facade reveal, or static city tableau
- location-specific natural palette and motivated windows or streetlights
- traffic, footsteps, transit, wind, or crowd ambience when grounded

10. Vehicles and transportation
- clear travel direction and stable landmark reference
- low medium-wide, side tracking, drone follow, or interior viewpoint
- visible wheel, body, wake, rail, road, or background parallax
- stable vehicle proportions and surface reflections
- engine, tire, rail, wind, water, or station sound tied to motion

11. Space exploration and astronomy
- extremely slow virtual drift or static cosmic tableau
- large negative space and clear scale contrast
- one coherent celestial light source
- consistent gravity state and restrained cosmic palette
- near-silence, cabin hum, breathing, or low ambient drone according to viewpoint

12. Fantasy, mythology, and supernatural scenes
- one coherent world palette and one visible magical source
- slow floating camera, measured push, or mythic static composition
- clear magical cause and visible result
- stable creature, costume, artifact, and environmental rules
- wind, fire, bell, shimmer, choir-like bed, or deep accent when grounded

13. Industrial, construction, and engineering
- wide scale view or precise detail view
- stable machinery geometry and readable process direction
- lateral track, crane view, or static tool close-up
- steel, concrete, warning color, steam, dust, sparks, or molten material with one dominant response
- mechanical hum, impact, hydraulic, conveyor, or tool sound synchronized to action

14. Technology products, interfaces, and robots
- centered product or machine geometry
- controlled orbit, slow reveal, or macro edge slide
- clean softbox or gradient light with restrained reflections
- stable screen, port, button, joint, and casing geometry
- electronic hum, mechanical click, interface tone, or clean studio room tone

15. Science fiction, futuristic worlds, and cyberpunk
- one coherent motivated technology-light system
- layered depth through architecture, rain, glass, screens, or haze
- stable push, follow, or lateral track
- restrained controlled accent colors and readable local materials
- electronic pulse, rain, machinery, distant traffic, or interface sound

16. Abstract graphics, data, and text visuals
- clear hierarchy and grid alignment
- static graphic composition or smooth virtual path
- staged information reveal
- readable typography and stable margins
- minimal digital ticks, whooshes, pulse, or clean silence

17. Medical, health, and life sciences
- stable medium, macro, or explanatory virtual camera
- clear spatial relationship among person, instrument, specimen, or anatomy
- soft clinical or humanizing light
- accurate large-scale anatomy and one clear interaction per segment
- calm room tone, instrument sound, breath, or monitor cue when grounded

18. Public safety, emergency, and rescue
- readable geography among subject, hazard, route, vehicle, and objective
- wide context followed by clear human action when multiple segments are available
- stable documentary follow or center-framed static action
- motivated emergency, fire, search, or storm light with readable dark detail
- footsteps, breathing, rain, fire, debris, vehicle, radio texture, or siren ambience when grounded

Mixed-profile handling:
- primary profile controls camera, light, composition, and rhythm
- one secondary profile may supply compatible material, environment, object, or sound details
- the final clip uses one coherent visual and physical system

========================
Compactness
========================

Keep the JSON compact while retaining render-critical information.

Recommended total descriptive length:
- one to two segments: about 350 to 700 English words
- three to four segments: about 600 to 1100 English words
- five to six segments: about 900 to 1500 English words

Field guidance:
- `global_layer.description`: about 35 to 85 words
- each object static description: about 18 to 50 words, maximum 100 words
- each living subject static description: about 30 to 75 words, maximum 150 words
- each segment description: about 25 to 65 words in one or two sentences
- each active background: about 8 to 35 words
- each focus, composition, movement, object-state, subject-action, causal, or sound field: one concise phrase or sentence

High-priority retained information:
- exact duration and aspect ratio
- selected final premise and structure
- realistic or user-specified visual baseline
- stable scene layout
- canonical subject and object traits
- every segment timestamp
- inherited mutable state
- principal action
- camera and focus
- speed, amplitude, contact order, and physical response
- resolved result
- exact dialogue and readable text
- cumulative object state and final location

Compression order:
1. secondary ambience texture
2. secondary background decoration
3. repeated global narrative wording
4. secondary entity details
5. optional mood adjectives

Use concrete nouns, active verbs, exact IDs, short clauses, and compact semicolon-separated specifications.
Use one global statement for global facts and dynamic fields for time-specific facts.
Repeat only canonical identity phrases, inherited state, owner, screen direction, and exposure anchors when repetition materially supports continuity.

========================
Construction Procedure
========================

Perform these steps internally:

1. Parse explicit subjects, objects, events, order, ending, dialogue, readable text, style, camera, light, color, sound, weather, time, location, composition, aspect ratio, and pacing.
2. Separate hard requirements from soft choices.
3. Divide the source into ordered event units.
4. Select Continuous-fit, Cut-based event-coverage, or Six-segment priority mode.
5. Select one to six exact timestamp ranges covering `00:00.0` through `00:10.0`.
6. Define stable textual scene labels and environment layouts.
7. Create one static entry for each persistent physical subject and object.
8. Run a distinct-entity audit for visually similar physical items.
9. Build the internal state ledger for identity, geometry, owner, position, orientation, and meaningful mutable state.
10. Choose two to four stable anchors from fixed visual regions and one main mutable state for each changing region.
11. Place permanent traits in static fields, baseline locative facts in static position fields, and first active mutable state in the first relevant dynamic entry.
12. Count risk flags and set the per-segment complexity budget.
13. Compress complex intent into the smallest set of diagnostic visual phases.
14. Build global layer baselines for aesthetics, audio, environment, light, camera, metadata, and permanent identities.
15. Assign one principal action and one completed visible result to each segment.
16. Calibrate each action as subtle, ordinary, energetic, or explicitly requested slow motion.
17. Select readable framing scale, camera, lens, focus, light, color, and composition using explicit instructions or controlled defaults.
18. Write each segment through inherited entry state, principal action, dynamic subject and object state, camera, causal event, resolved result, audio, and readable text.
19. Apply the relevant contact sequence for pickup, placement, handoff, impact, opening, closing, pouring, insertion, removal, release, or crossover.
20. Keep each continuous physical event inside one segment through its settled result.
21. Carry every entity's resolved state into its next dynamic appearance.
22. Add exact user-provided dialogue and readable text.
23. Add physically motivated audio cues at phrase, release, contact, landing, or final-hold level.
24. Run a state-chain and persistent-visibility audit across every recurring entity.
25. Run an ID, speaker-tag, event, and timestamp audit.
26. Run a redundancy audit across static descriptions, baseline position, segment description, dynamic state, spatial position, and causal outcome.
27. Run a cut-boundary audit so every boundary follows a stable result.
28. Run a motion-load audit and sequence articulated, contact, transparent-object, and material complexity.
29. Run a motion audit so single-action clips use clear amplitude and action-appropriate speed.
30. Run a framing audit so complete hands, contact regions, full-body limbs, and story-critical objects remain readable.
31. Run a camera-motion audit so travel retains screen displacement and background parallax.
32. Run a light-continuity audit so the final hold inherits established exposure, white balance, and local colors.
33. Run a positive-language rewrite across every generated string.
34. Run a compactness pass and remove repeated information, exhaustive micro-detail, and low-value decoration.
35. Validate exact schema, field types, IDs, timing, optional-key handling, arrays, and JSON syntax.
36. Return the final JSON object alone.

========================
Final Checklist
========================

Before returning, verify:
- valid JSON with exactly `global_layer` and `dynamic_layer` at the top level
- all required nested fields use the specified data types
- optional keys follow the schema's omission rules
- duration equals `10.0`
- aspect ratio preserves the explicit user ratio or uses `16:9`
- timeline segments continuously cover `00:00.0` through `00:10.0`
- every subject ID, object ID, event ID, speaker tag, and timestamp resolves literally
- every distinct physical entity has its own ID
- every persistent entity keeps one ID
- body regions from one person remain inside one subject entity
- explicit subjects, events, causal order, ending, dialogue, readable text, and style are preserved
- long narrative scope becomes ordered clean cuts when natural action needs multiple segments
- explicit event coverage is maximized before event selection reduces the source
- each segment contains one principal action and one dominant movement direction
- single-action clips use visible amplitude and action-appropriate speed
- fast travel retains complete body or vehicle geometry, readable focus, screen travel, and background parallax
- each contact sequence has a clear start, transfer or impact, release or response, and resolved state
- static fields contain permanent traits and baseline locative facts
- active movement begins in the first relevant dynamic entry
- complex articulated motion uses grouped, sequential, readable phases
- every story-critical object remains visually identifiable through impact, submersion, landing, and overlap
- every segment boundary follows a stable result
- full-body and hand-object actions use readable subject scale and complete contact regions
- every later dynamic appearance inherits the prior resolved condition, owner, position, orientation, fill level, damage, wetness, open state, or age
- changing regions use one clear mutable state
- each segment ends after the visible result settles
- the final segment holds a resolved pose or object state
- the final hold retains established exposure, white balance, skin tone, object color, and material response
- realistic scenes use low-to-moderate contrast, broad diffuse motivated light, gentle ambient fill, open shadow detail, protected highlights, neutral white balance, and restrained true-to-life saturation
- exact readable text appears in the relevant `text_render` entry and one matching compact survival clause inside `segment_description`
- generated descriptive prose uses affirmative target-state grammar
- generated descriptive prose contains zero grammatical negation, zero rejected-plan language, zero defect vocabulary, and zero compiler commentary
- render-critical camera, motion, state, causal, visibility, and text facts survive the compact renderer through minimal consistent survival clauses
- JSON contains compact render-critical information

Return the final JSON object alone.)avdit";

const std::string_view kT2vSchema = R"avdit({
  "type": "object",
  "properties": {
    "global_layer": {
      "type": "object",
      "properties": {
        "context": {
          "type": "string"
        },
        "description": {
          "type": "string"
        },
        "aesthetics": {
          "type": "object",
          "properties": {
            "style": {
              "type": "string"
            },
            "contrast": {
              "type": "string"
            },
            "saturation": {
              "type": "string"
            },
            "color_scheme": {
              "type": "string"
            },
            "visual_effects": {
              "type": "string"
            },
            "mood_atmosphere": {
              "type": "string"
            }
          },
          "required": [
            "style",
            "contrast",
            "saturation",
            "color_scheme",
            "visual_effects",
            "mood_atmosphere"
          ],
          "additionalProperties": false
        },
        "audio_baseline": {
          "type": "object",
          "properties": {
            "ambience": {
              "type": "string"
            },
            "dialogue": {
              "type": "object",
              "properties": {
                "language": {
                  "type": "string"
                },
                "speaker_tags": {
                  "type": "array",
                  "items": {
                    "type": "string"
                  }
                }
              },
              "required": [
                "language",
                "speaker_tags"
              ],
              "additionalProperties": false
            }
          },
          "required": [
            "ambience",
            "dialogue"
          ],
          "additionalProperties": false
        },
        "objects_static": {
          "type": "array",
          "items": {
            "type": "object",
            "properties": {
              "object_id": {
                "type": "string"
              },
              "description": {
                "type": "string"
              },
              "shape_and_color": {
                "type": "string"
              },
              "texture": {
                "type": "string"
              },
              "relative_size": {
                "type": "string"
              },
              "position": {
                "type": "string"
              },
              "orientation": {
                "type": "string"
              }
            },
            "required": [
              "object_id",
              "description",
              "shape_and_color",
              "texture",
              "relative_size",
              "position",
              "orientation"
            ],
            "additionalProperties": false
          }
        },
        "video_metadata": {
          "type": "object",
          "properties": {
            "duration": {
              "type": "number"
            },
            "aspect_ratio": {
              "type": "string"
            }
          },
          "required": [
            "duration",
            "aspect_ratio"
          ],
          "additionalProperties": false
        },
        "lighting_baseline": {
          "type": "object",
          "properties": {
            "conditions": {
              "type": "string"
            },
            "direction": {
              "type": "string"
            },
            "shadows": {
              "type": "string"
            },
            "source_consistency": {
              "type": "string"
            }
          },
          "required": [
            "conditions",
            "direction",
            "shadows",
            "source_consistency"
          ],
          "additionalProperties": false
        },
        "environment_baseline": {
          "type": "object",
          "properties": {
            "background_setting": {
              "type": "string"
            }
          },
          "required": [
            "background_setting"
          ],
          "additionalProperties": false
        },
        "alive_subjects_static": {
          "type": "array",
          "items": {
            "type": "object",
            "properties": {
              "subject_id": {
                "type": "string"
              },
              "description": {
                "type": "string"
              },
              "position": {
                "type": "string"
              },
              "orientation": {
                "type": "string"
              },
              "visual_attributes": {
                "type": "object",
                "properties": {
                  "gender": {
                    "type": "string"
                  },
                  "ethnicity": {
                    "type": "string"
                  },
                  "age_group": {
                    "type": "string"
                  },
                  "facial_features": {
                    "type": "string"
                  },
                  "clothing": {
                    "type": "string"
                  },
                  "appearance_details": {
                    "type": "string"
                  }
                },
                "required": [
                  "gender",
                  "ethnicity",
                  "age_group",
                  "facial_features",
                  "clothing",
                  "appearance_details"
                ],
                "additionalProperties": false
              }
            },
            "required": [
              "subject_id",
              "description",
              "position",
              "orientation",
              "visual_attributes"
            ],
            "additionalProperties": false
          }
        },
        "camera_cinematography": {
          "type": "object",
          "properties": {
            "overall_camera_style": {
              "type": "string"
            },
            "default_depth_of_field": {
              "type": "string"
            },
            "lens_focal_length": {
              "type": "string"
            }
          },
          "required": [
            "overall_camera_style",
            "default_depth_of_field",
            "lens_focal_length"
          ],
          "additionalProperties": false
        }
      },
      "required": [
        "context",
        "description",
        "aesthetics",
        "audio_baseline",
        "objects_static",
        "video_metadata",
        "lighting_baseline",
        "environment_baseline",
        "alive_subjects_static",
        "camera_cinematography"
      ],
      "additionalProperties": false
    },
    "dynamic_layer": {
      "type": "object",
      "properties": {
        "timeline_segments": {
          "type": "array",
          "items": {
            "type": "object",
            "properties": {
              "segment_basic_info": {
                "type": "object",
                "properties": {
                  "timestamp_range": {
                    "type": "string"
                  },
                  "segment_description": {
                    "type": "string"
                  },
                  "active_background": {
                    "type": "string"
                  },
                  "lighting_delta": {
                    "type": "string"
                  },
                  "camera_delta": {
                    "type": "object",
                    "properties": {
                      "focus": {
                        "type": "string"
                      },
                      "camera_position": {
                        "type": "string"
                      },
                      "composition": {
                        "type": "string"
                      },
                      "camera_movement": {
                        "type": "object",
                        "properties": {
                          "type": {
                            "type": "string"
                          },
                          "direction": {
                            "type": "string"
                          },
                          "intensity": {
                            "type": "string"
                          }
                        },
                        "required": [
                          "type",
                          "direction",
                          "intensity"
                        ],
                        "additionalProperties": false
                      }
                    },
                    "required": [
                      "focus",
                      "camera_position",
                      "composition",
                      "camera_movement"
                    ],
                    "additionalProperties": false
                  }
                },
                "required": [
                  "timestamp_range",
                  "segment_description",
                  "active_background",
                  "lighting_delta",
                  "camera_delta"
                ],
                "additionalProperties": false
              },
              "objects": {
                "type": "array",
                "items": {
                  "type": "object",
                  "properties": {
                    "object_id": {
                      "type": "string"
                    },
                    "timestamp": {
                      "type": "string"
                    },
                    "number_of_objects": {
                      "type": "integer"
                    },
                    "dynamic_state": {
                      "type": "object",
                      "properties": {
                        "state_change": {
                          "type": "string"
                        },
                        "motion_detail": {
                          "type": "string"
                        },
                        "visible_condition": {
                          "type": "string"
                        }
                      },
                      "required": [
                        "state_change",
                        "motion_detail",
                        "visible_condition"
                      ],
                      "additionalProperties": false
                    },
                    "spatial_position": {
                      "type": "object",
                      "properties": {
                        "location": {
                          "type": "string"
                        },
                        "relative_size": {
                          "type": "string"
                        },
                        "orientation": {
                          "type": "string"
                        }
                      },
                      "required": [
                        "location",
                        "relative_size",
                        "orientation"
                      ],
                      "additionalProperties": false
                    }
                  },
                  "required": [
                    "object_id",
                    "timestamp",
                    "number_of_objects",
                    "dynamic_state",
                    "spatial_position"
                  ],
                  "additionalProperties": false
                }
              },
              "alive_subjects": {
                "type": "array",
                "items": {
                  "type": "object",
                  "properties": {
                    "subject_id": {
                      "type": "string"
                    },
                    "timestamp": {
                      "type": "string"
                    },
                    "number_of_subjects": {
                      "type": "integer"
                    },
                    "spatial_position": {
                      "type": "object",
                      "properties": {
                        "location": {
                          "type": "string"
                        },
                        "relative_size": {
                          "type": "string"
                        },
                        "orientation": {
                          "type": "string"
                        }
                      },
                      "required": [
                        "location",
                        "relative_size",
                        "orientation"
                      ],
                      "additionalProperties": false
                    },
                    "action": {
                      "type": "object",
                      "properties": {
                        "primary_action": {
                          "type": "string"
                        },
                        "body_configuration": {
                          "type": "string"
                        },
                        "motion_detail": {
                          "type": "string"
                        },
                        "interaction": {
                          "type": "string"
                        },
                        "facial_expression": {
                          "type": "string"
                        }
                      },
                      "required": [
                        "primary_action",
                        "body_configuration",
                        "motion_detail",
                        "interaction",
                        "facial_expression"
                      ],
                      "additionalProperties": false
                    }
                  },
                  "required": [
                    "subject_id",
                    "timestamp",
                    "number_of_subjects",
                    "spatial_position",
                    "action"
                  ],
                  "additionalProperties": false
                }
              },
              "text_render": {
                "type": "array",
                "items": {
                  "type": "object",
                  "properties": {
                    "text": {
                      "type": "string"
                    },
                    "timestamp": {
                      "type": "string"
                    },
                    "location": {
                      "type": "string"
                    },
                    "size": {
                      "type": "string"
                    },
                    "color": {
                      "type": "string"
                    },
                    "font": {
                      "type": "string"
                    },
                    "appearance_details": {
                      "type": "string"
                    }
                  },
                  "required": [
                    "text",
                    "timestamp",
                    "location",
                    "size",
                    "color",
                    "font",
                    "appearance_details"
                  ],
                  "additionalProperties": false
                }
              },
              "causal_events": {
                "type": "array",
                "items": {
                  "type": "object",
                  "properties": {
                    "event_id": {
                      "type": "string"
                    },
                    "timestamp_range": {
                      "type": "string"
                    },
                    "trigger": {
                      "type": "string"
                    },
                    "effect_outcome": {
                      "type": "string"
                    },
                    "physics": {
                      "type": "string"
                    }
                  },
                  "required": [
                    "event_id",
                    "timestamp_range",
                    "trigger",
                    "effect_outcome",
                    "physics"
                  ],
                  "additionalProperties": false
                }
              },
              "audio": {
                "type": "object",
                "properties": {
                  "dialogue_lines": {
                    "type": "array",
                    "items": {
                      "type": "object",
                      "properties": {
                        "timestamp": {
                          "type": "string"
                        },
                        "speaker": {
                          "type": "string"
                        },
                        "text": {
                          "type": "string"
                        },
                        "delivery": {
                          "type": "string"
                        }
                      },
                      "required": [
                        "timestamp",
                        "speaker",
                        "text",
                        "delivery"
                      ],
                      "additionalProperties": false
                    }
                  },
                  "ambience_deltas": {
                    "type": "array",
                    "items": {
                      "type": "object",
                      "properties": {
                        "timestamp_range": {
                          "type": "string"
                        },
                        "ambience": {
                          "type": "string"
                        }
                      },
                      "required": [
                        "timestamp_range",
                        "ambience"
                      ],
                      "additionalProperties": false
                    }
                  },
                  "special_audio_events": {
                    "type": "array",
                    "items": {
                      "type": "object",
                      "properties": {
                        "timestamp": {
                          "type": "string"
                        },
                        "sound_description": {
                          "type": "string"
                        },
                        "visual_sync": {
                          "type": "string"
                        }
                      },
                      "required": [
                        "timestamp",
                        "sound_description",
                        "visual_sync"
                      ],
                      "additionalProperties": false
                    }
                  }
                },
                "required": [
                  "dialogue_lines",
                  "ambience_deltas",
                  "special_audio_events"
                ],
                "additionalProperties": false
              }
            },
            "required": [
              "segment_basic_info",
              "objects",
              "alive_subjects",
              "text_render",
              "causal_events",
              "audio"
            ],
            "additionalProperties": false
          }
        }
      },
      "required": [
        "timeline_segments"
      ],
      "additionalProperties": false
    }
  },
  "required": [
    "global_layer",
    "dynamic_layer"
  ],
  "additionalProperties": false
}
)avdit";

}  // namespace avdit::pipeline::enhance
