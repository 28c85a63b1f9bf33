// The MAGI-2 reference's image-to-video prompt-enhancement template and output schema, verbatim
// from SandAI-org/MAGI-2-preview@f68a0f9: inference/prompt_enhancement/prompts/i2v.md and
// I2V_RESPONSE_SCHEMA of pe_schemas.py (as JSON). Any edit changes the template id.
#include "pipeline/enhance/templates.h"

namespace avdit::pipeline::enhance {

// The template is sent as the user message, {user_input_text} and {variation_seed} replaced.
const std::string_view kI2vTemplate =
    R"avdit(You are an Audio Visual Director Script Caption Compiler for an Image-to-Video (I2V) generation model.
Your task is to analyze the provided input image and the user's free-form text prompt, enhance user prompt to be more specific and detailed, to output a professional, structured, generation-ready video caption. 
Since the starting visual state is already established by the image, your primary role is to **preserve the image's content** and **drastically enhance the motion, temporal dynamics, physics, and camera instructions** that the user left out.
The response must be a single valid JSON object and must follow the exact output schema below.

========================
Required Output Schema
========================
Return exactly this JSON structure:
{
"global_caption": {
    "core_caption": "",
    "format_and_structure": "",
    "narrative_and_emotional_design": "",
    "visual_design": "",
    "audio_design": "",
    "continuity_requirements": []
},
"reference_bank": [],
"shot_timeline": [],
"audio_event_timeline": [],
"visible_text": [],
"generation_requirements": []
}
Use valid JSON syntax.
Do not output markdown.
Do not output explanations outside the JSON.
Use empty arrays only when a section truly has no applicable content.

========================
Input Variables
========================
User input:
{user_input_text}

Optional variation seed:
{variation_seed}

========================
Language and Caption Voice
========================
Write all descriptive content in clear, simple English using direct, objective director-style language. For Chinese user input, translate descriptive content into English while keeping quoted speech and visible UI/signage text in the original language. Focus heavily on verbs and temporal shifts.
Good: "The camera pushes in slowly from the initial wide frame as the woman’s coat billows in the newly formed wind."
Bad: "The image will start to move and the woman should walk."

========================
I2V Core Principles
========================
1. The Image is the Absolute Baseline.
You must lock in the subjects, lighting, composition, style, and setting of the input image for the beginning of the timeline. The prompt cannot alter the past; it can only dictate the future of the frame.        
2. Hyper-Focus on Motion Enrichment.
Because the visual aesthetic is pre-defined, your "Director Fill" must focus on physical motion. When the user leaves motion unspecified, enrich it with:
- Precise joint articulation and kinematic realism for human/animal subjects to prevent limb distortion.
- Fluid dynamics for water, smoke, or weather.
- Camera trajectories (pan, tilt, track, crane, focal pull) that logically extend from the image's initial 2D composition into 3D space.
- Cause-and-effect physics (e.g., footsteps displacing dust, weight-bearing shifts).
3. Aesthetic Continuity.
Do not invent new lighting or styles unless bridging a user-requested transition. Analyze the image's contrast, color palette, and exposure, and explicitly instruct the model to maintain those exact parameters throughout the video.
4. Relational Grounding.
Important characters, objects, and scenes extracted from the image must be cataloged in the `reference_bank` so their identity remains strictly stable across the generated motion.

========================
Default Duration Rule
========================
The default duration is exactly 10.0 seconds. 
When the user specifies a duration, map it to 10 seconds. Otherwise, format the `shot_timeline` and `audio_event_timeline` to explicitly map a 10.0-second chronological evolution. I2V requires smooth temporal continuity, so default to single-shot continuous takes `[0.0, 10.0]` unless the user text implies a montage.

========================
Motion Director Fill Intensity
========================
1. Light enrichment:
Use when the user provides highly specific camera, physics, and action instructions. Add only stability requirements and audio-visual synchronization.
2. Medium enrichment:
Use when the user provides an action but no camera or physics details. Lock the camera movement to track the action, add environmental interactions (wind, gravity, fabric movement), and define a clear start, middle, and end state.
3. Strong enrichment (Static Image Awakening):
Use when the user input is abstract, generic, or just says "animate". You must invent a logically sound trajectory for the scene. Add subtle parallax camera movement, ambient environmental motion (e.g., breathing, leaves rustling, water rippling), and one distinct physical turning beat.

========================
Critical Decision Policy: 
Analyze, Filter, and Enhance
========================
Before writing the JSON, internally execute:
Step 1: Extract Ground Truth from the Image.
Identify the exact subject identity, spatial layout, lighting direction, and visual texture of the starting frame.
Step 2: Enhance User Text.
Compare user text to image ground truth. Enhance the user text to be more specific and detailed.
Step 3: Inject Category-Specific Motion (18 Categories).
Select the best primary content category below. Instead of pulling static aesthetic details, pull the category's specific **Motion, Physics, and Camera** defaults to animate the image. 
Step 4: Ensure Structural Rigidity.
The most common failure in I2V is structural collapse during high-speed movement. Explicitly describe how volume, anatomy, and physical boundaries are maintained during the motion you script.

========================
18 Content Categories: Motion and Physics Bank
========================
(Apply these physical rules to bring the static image to life based on its detected category)
1. Natural Landscapes and Weather
Camera: Slow drone push-in, lateral parallax shift to reveal 3D depth.
Motion: Clouds drifting, water surface tension rippling, wind swaying foreground foliage. Maintain stable horizon lines. 

2. Objects, Materials, and Micro-Motion
Camera: Probe-lens glide or slow orbit.
Motion: High-fidelity material response. Fluid viscosity, steam rising, fabric settling, or precise light refraction changing as the camera moves.

3. Animals, Wildlife, and Pets
Camera: Stabilized tracking, keeping the eyes on the focal plane.
Motion: Anatomically correct quadruped/bipedal gait, fur/feather movement reacting to wind and inertia, micro-expressions in the ears and eyes. Prevent structural limb morphing.

4. Sports, Fitness, and Outdoor Activity
Camera: High-speed gimbal follow, matching the velocity of the subject.
Motion: Weight transfer, muscle tension, ground-impact physics (dust, sweat, chalk). Fast kinematic motion must strictly maintain joint locking and volume.

5. Everyday Human Life and Social Moments
Camera: Soft handheld breathing, slow push-in for emotional intimacy.
Motion: Natural body language, chest rising with breath, subtle gaze shifting, secondary clothing movement.

6. Science Education and Physical Phenomena
Camera: Locked-off or smooth top-down track.
Motion: Strict adherence to real-world physics (diffusion, gravity, magnetism, thermodynamics). Left-to-right progression of chemical or physical states.

7. Art, Performance, and Cultural Events
Camera: Rhythmic lateral tracking or sweeping crane movement.
Motion: Graceful, choreographed human articulation. Cloth flowing with momentum, precise instrument interaction.

8. Food, Beverage, and Cooking
Camera: 45-degree tabletop macro push-in or slow pan.
Motion: Heat-based physics (bubbling, steam, melting), slow-motion pours with correct liquid viscosity, knife impact.

9. City Travel, Landmarks, and Architecture
Camera: Smooth hyperlapse or slow tilt to establish verticality.
Motion: Traffic flow, pedestrian crowds moving with independent trajectories, shifting reflections on glass as the camera translates.

10. Vehicles and Transportation
Camera: Rolling tracking shot or vehicle-mounted POV.
Motion: Wheel rotation matching ground speed, suspension reacting to terrain, aerodynamic drag on smoke or rain, accurate mechanical articulation.

11. Space Exploration and Astronomy
Camera: Extremely slow, frictionless orbital drift.
Motion: Zero-gravity physics, slow rotation of celestial bodies, lack of atmospheric distortion, harsh shadow shifts as objects rotate relative to the light source.

12. Fantasy, Mythology, and Supernatural
Camera: Dreamlike floating dolly or slow portal push-through.
Motion: Volumetric glowing particles, unnatural but internally consistent gravity (e.g., floating rocks), cloaks reacting to magical updrafts. 

13. Industrial Manufacturing, Construction
Camera: Mechanical linear tracking.
Motion: Rigid body dynamics, heavy impacts, robotic arm articulation with locked joints, sparks falling with gravity and bouncing on hard surfaces.

14. Technology Products and Digital Interfaces
Camera: Motion-control robotic orbit or macro edge slide.
Motion: Controlled screen UI animations, slow illumination of hardware LEDs, perfect rigid-body stability (no warping of straight metal edges).

15. Science Fiction and Cyberpunk
Camera: Rain-night street tracking, navigating through layered depth.
Motion: Flickering neon logic, steam venting upward, flying vehicles maintaining stable trajectories, cybernetic joint movement.

16. Abstract Graphics, Data, and Text
Camera: Isometric glide or zoom through layers.
Motion: Smooth easing (ease-in/ease-out), grid-locked transitions, particles following mathematical attractors. No organic morphing unless specified.

17. Medical, Health, and Life Sciences
Camera: Smooth 3D fly-through or stable clinical observation.
Motion: Anatomically strict biological processes (blood flow, cellular division, chest breathing). Zero fleshy distortion of tools or instruments.

18. Public Safety, Military, and Emergency
Camera: Documentary handheld follow with sudden responsive pans.
Motion: Urgent kinematic movement, chaotic but physically grounded debris fall, smoke reacting to wind and heat thermodynamics.

========================
Dimension-Level I2V Fill Rules
========================
1. Camera Movement: The camera must logically start from the exact framing of the input image. If the image is a macro shot, you cannot immediately transition to an extreme wide shot without a continuous pull-back.
2. Lighting & Color: Write explicit instructions to maintain the image's initial lighting setup. If a time-lapse or environmental change is triggered by the text, describe the transition of the light source.
3. Motion and Physical Logic (CRITICAL): You must define the start, process, and end states of the movement. Translate the user's verbs into precise physical instructions (e.g., instead of "he dances", use "he shifts his weight, articulating his knees, while his arms swing chronologically").
4. Visible Text: If the input image contains readable text/logos, add a continuity requirement to lock the text shape. Do not invent new UI or signs unless requested.

========================
Global Caption & Reference Bank Rules
========================
`global_caption.core_caption`: One sentence combining the image's starting state with the user's requested motion.
`global_caption.visual_design`: Describe the aesthetic of the *input image* so the model knows what to maintain.
`global_caption.continuity_requirements`: Must include rules about maintaining the image's exact character identities, background architecture, and preventing structural morphing/limb distortion during movement.
`reference_bank`: Define the image's subjects here. Under `appearance_or_design`, describe them exactly as they look in the starting state. 

========================
Final Output Checklist
========================
Before returning, verify:
- The JSON is valid and matches the exact schema requested.
- The prompt logic treats the image as unalterable past and the text as the trajectory for the future.
- The shot timeline includes heavy emphasis on physical physics, camera dynamics, and preventing distortion.
- The default duration is 10.0 seconds.
- The text outputs direct, professional script language.)avdit";

const std::string_view kI2vSchema = R"avdit({
  "type": "object",
  "properties": {
    "global_caption": {
      "type": "object",
      "properties": {
        "core_caption": {
          "type": "string"
        },
        "format_and_structure": {
          "type": "string"
        },
        "narrative_and_emotional_design": {
          "type": "string"
        },
        "visual_design": {
          "type": "string"
        },
        "audio_design": {
          "type": "string"
        },
        "continuity_requirements": {
          "type": "array",
          "items": {
            "type": "string"
          }
        }
      },
      "required": [
        "core_caption",
        "format_and_structure",
        "narrative_and_emotional_design",
        "visual_design",
        "audio_design",
        "continuity_requirements"
      ],
      "additionalProperties": false
    },
    "reference_bank": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "reference_identifier": {
            "type": "string"
          },
          "reference_type": {
            "type": "string"
          },
          "label": {
            "type": "string"
          },
          "role": {
            "type": "string"
          },
          "description": {
            "type": "string"
          },
          "appearance_or_design": {
            "type": "string"
          }
        },
        "required": [
          "reference_identifier",
          "reference_type",
          "label",
          "role",
          "description",
          "appearance_or_design"
        ],
        "additionalProperties": false
      }
    },
    "shot_timeline": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "shot_identifier": {
            "type": "string"
          },
          "time_range_seconds": {
            "type": "array",
            "items": {
              "type": "number"
            }
          },
          "scene_reference_identifier": {
            "type": "string"
          },
          "shot_caption": {
            "type": "string"
          },
          "camera_lighting_and_composition": {
            "type": "string"
          },
          "motion_and_physical_logic": {
            "type": "string"
          },
          "reference_identifiers": {
            "type": "array",
            "items": {
              "type": "string"
            }
          },
          "audio_event_identifiers": {
            "type": "array",
            "items": {
              "type": "string"
            }
          }
        },
        "required": [
          "shot_identifier",
          "time_range_seconds",
          "scene_reference_identifier",
          "shot_caption",
          "camera_lighting_and_composition",
          "motion_and_physical_logic",
          "reference_identifiers",
          "audio_event_identifiers"
        ],
        "additionalProperties": false
      }
    },
    "audio_event_timeline": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "audio_event_identifier": {
            "type": "string"
          },
          "event_type": {
            "type": "string"
          },
          "time_range_seconds": {
            "type": "array",
            "items": {
              "type": "number"
            }
          },
          "source_reference_identifier": {
            "type": "string"
          },
          "audio_caption": {
            "type": "string"
          },
          "spoken_text": {
            "type": "string"
          },
          "synchronization_note": {
            "type": "string"
          }
        },
        "required": [
          "audio_event_identifier",
          "event_type",
          "time_range_seconds",
          "source_reference_identifier",
          "audio_caption",
          "spoken_text",
          "synchronization_note"
        ],
        "additionalProperties": false
      }
    },
    "visible_text": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "visible_text_identifier": {
            "type": "string"
          },
          "text": {
            "type": "string"
          },
          "time_range_seconds": {
            "type": "array",
            "items": {
              "type": "number"
            }
          },
          "position_and_role": {
            "type": "string"
          },
          "source_reference_identifier": {
            "type": "string"
          }
        },
        "required": [
          "visible_text_identifier",
          "text",
          "time_range_seconds",
          "position_and_role",
          "source_reference_identifier"
        ],
        "additionalProperties": false
      }
    },
    "generation_requirements": {
      "type": "array",
      "items": {
        "type": "string"
      }
    }
  },
  "required": [
    "global_caption",
    "reference_bank",
    "shot_timeline",
    "audio_event_timeline",
    "visible_text",
    "generation_requirements"
  ],
  "additionalProperties": false
}
)avdit";

}  // namespace avdit::pipeline::enhance
